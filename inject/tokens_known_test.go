package inject

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// TestKnownCounts checks the precomputed token counts against the
// tokenizer itself, and that every configuration's pointer has one.
func TestKnownCounts(t *testing.T) {
	e, err := encoder()
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range knownCounts {
		if got := e.Count(s); got != want {
			t.Errorf("knownCounts[%q] = %d, the tokenizer counts %d", s, want, got)
		}
	}
	for _, in := range pointerConfigs() {
		p := in.pointer()
		if p == "" {
			continue
		}
		for _, sep := range []string{"", "\n\n"} {
			if _, ok := knownCounts[sep+Marker+" "+p]; !ok {
				t.Errorf("no known count for the pointer of %+v with separator %q", in, sep)
			}
		}
	}
}

// pointerConfigs returns an injector for each combination of the options
// that shape the pointer.
func pointerConfigs() []*Injector {
	var out []*Injector
	for _, noQuery := range []bool{false, true} {
		for _, tool := range []bool{false, true} {
			for _, hint := range []bool{false, true} {
				out = append(out, &Injector{NoQueryTool: noQuery, EndTaskTool: tool, EndTaskHint: hint,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			}
		}
	}
	return out
}

// TestNoLessonsNoTokenizer runs, in a fresh process, what a sidecar without
// lessons does (initialize with and without server instructions,
// tools/list, a query with no result) under every configuration, and
// checks that the tokenizer was never loaded.
func TestNoLessonsNoTokenizer(t *testing.T) {
	if os.Getenv("HINDSIGHT_TOKENIZER_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoLessonsNoTokenizer$", "-test.count=1")
		cmd.Env = append(os.Environ(), "HINDSIGHT_TOKENIZER_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	ctx := context.Background()
	for i, in := range pointerConfigs() {
		in.Source = &fakeSearcher{}
		for _, result := range []string{`{"instructions":"Use with care."}`, `{"protocolVersion":"2025-06-18"}`} {
			s := &proxy.Session{ID: "s", Server: "example"}
			out := in.Initialize(ctx, s, json.RawMessage(result))
			if in.pointer() != "" && out == nil {
				t.Errorf("config %d: no instructions injected into %s", i, result)
			}
			in.ToolsList(ctx, s, json.RawMessage(`{"tools":[{"name":"a"}]}`))
		}
		if _, _, err := in.Query(ctx, "example", "a situation", "", ""); err != nil {
			t.Errorf("config %d: query: %v", i, err)
		}
	}
	if encLoaded.Load() {
		t.Fatal("a sidecar without lessons loaded the tokenizer")
	}
}
