package cli

import (
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

func TestReadExport(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		steps   int
		wantErr string
	}{
		{"empty", "", 0, ""},
		{"blank lines", "\n  \n", 0, ""},
		{"two steps", `{"task_id":"a","source":"s","seq":1}` + "\n\n" + `{"task_id":"a","source":"s","seq":2}` + "\n", 2, ""},
		{"no final newline", `{"task_id":"a","source":"s","seq":1}`, 1, ""},
		{"bad line", `{"task_id":"a"}` + "\nnot json\n", 0, "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			err := readExport(strings.NewReader(tt.in), func(b []hindsight.Step) error { n += len(b); return nil })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || n != tt.steps {
				t.Fatalf("steps %d, err %v; want %d", n, err, tt.steps)
			}
		})
	}
}

// Batches end at a task's boundary once they are large enough.
func TestReadExportBatches(t *testing.T) {
	var b strings.Builder
	for i := 0; i < importBatch+10; i++ {
		task := "a"
		if i >= importBatch+5 {
			task = "b"
		}
		b.WriteString(`{"task_id":"` + task + `","source":"s"}` + "\n")
	}
	var sizes []int
	if err := readExport(strings.NewReader(b.String()), func(s []hindsight.Step) error { sizes = append(sizes, len(s)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 2 || sizes[0] != importBatch+5 || sizes[1] != 5 {
		t.Fatalf("batches %v", sizes)
	}
}

func FuzzReadExport(f *testing.F) {
	f.Add(`{"task_id":"a","source":"s","seq":1}` + "\n")
	f.Add("\n\n{}\n")
	f.Fuzz(func(t *testing.T, in string) {
		_ = readExport(strings.NewReader(in), func([]hindsight.Step) error { return nil })
	})
}
