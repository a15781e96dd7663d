package capture

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// TestDrainNoFalseClockJump: draining a dead sidecar's outbox, whose age
// the drainer cannot know, does not warn that the clock jumped (it used
// to, with an uptime of 2562047h: an overflow).
func TestDrainNoFalseClockJump(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	dead, err := New(Options{Home: home, Redactor: testRedactor(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges(5) {
		dead.Hook(ex)
	}
	if err := dead.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	d := &spooltest.Collector{}
	n, err := drainOrphans(context.Background(), home, d, slog.New(slog.NewTextHandler(&logs, nil)), 0)
	if err != nil || n != 5 {
		t.Fatalf("drained %d, %v", n, err)
	}
	if strings.Contains(logs.String(), "clock jumped") {
		t.Fatalf("false clock-jump warning:\n%s", logs.String())
	}
}
