package cli

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParseFlagsInterspersed(t *testing.T) {
	cases := []struct {
		args []string
		pos  []string
		tool string
		k    int
		json bool
	}{
		{args: []string{"read file", "--tool", "read_file"}, pos: []string{"read file"}, tool: "read_file", k: 5},
		{args: []string{"--json", "a", "-k", "2", "b"}, pos: []string{"a", "b"}, k: 2, json: true},
		{args: []string{"a", "--", "--tool", "x"}, pos: []string{"a", "--tool", "x"}, k: 5},
		{args: nil, pos: nil, k: 5},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		tool := fs.String("tool", "", "")
		k := fs.Int("k", 5, "")
		asJSON := fs.Bool("json", false, "")
		pos, err := parseFlags(fs, tc.args)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if !slices.Equal(pos, tc.pos) || *tool != tc.tool || *k != tc.k || *asJSON != tc.json {
			t.Errorf("%q: pos %q tool %q k %d json %v", tc.args, pos, *tool, *k, *asJSON)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseFlags(fs, []string{"a", "--nope"}); err == nil {
		t.Error("an unknown flag after an argument was accepted")
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
