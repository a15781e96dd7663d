package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestTablesPrintNoControls: what servers, clients and packs name reaches
// the terminal with its control characters removed, in every table.
func TestTablesPrintNoControls(t *testing.T) {
	const evil = "x\x1b]0;pwned\x07\x1b[2J\u009b2J"
	var out bytes.Buffer
	task := hindsight.Task{ID: "t" + evil, Servers: []string{"s" + evil}, Reflection: "r" + evil, StepCount: 1}
	if err := printTasks(&out, []hindsight.Task{task}); err != nil {
		t.Fatal(err)
	}
	p := &textTask{w: &out}
	if err := p.head(&task); err != nil {
		t.Fatal(err)
	}
	if err := p.step(&hindsight.Step{Server: "s" + evil, Tool: "tool" + evil, Method: "tools/call",
		Error: &hindsight.RPCError{Message: "e" + evil}}); err != nil {
		t.Fatal(err)
	}
	if err := p.end(); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07\u009b") {
		t.Errorf("control characters printed:\n%q", out.String())
	}
	if !strings.Contains(out.String(), "toolx2J") {
		t.Errorf("the tool's name is not printed, cleaned:\n%s", out.String())
	}
}
