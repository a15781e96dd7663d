package spool

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// TestOutboxRejectedStub: a step the daemon refuses is replaced by its stub
// (no bodies, its size and hash in "truncated"), so the daemon sees every
// seq of the source and a session's close waiting for it completes.
func TestOutboxRejectedStub(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{Refuse: spooltest.Reject(ErrRejected, func(s hindsight.Step) bool { return s.Seq == 7 && len(s.Arguments) > 0 })}
	c := &counters{}
	r, err := open(Options{Home: home, Deliverer: d, Logger: slog.New(slog.DiscardHandler)}, c)
	if err != nil {
		t.Fatal(err)
	}
	r.Append(testSteps(20))
	testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return c.delivered.Load() == 19 && c.rejected.Load() == 1 })
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := d.Got()
	if len(got) != 20 {
		t.Fatalf("delivered %d steps, want 19 and a stub", len(got))
	}
	for i, s := range got {
		if s.Seq != uint64(i+1) {
			t.Fatalf("delivered seq %d at %d: a gap", s.Seq, i)
		}
	}
	stub := got[6]
	if stub.Method != "tools/call" || stub.Tool != "read_file" || stub.SessionID != "s1" || stub.Source != r.ID() ||
		len(stub.Arguments) != 0 || len(stub.Request) != 0 || len(stub.Truncated) != 1 || stub.Truncated[0].Field != "step" ||
		stub.Truncated[0].OriginalSize == 0 || len(stub.Truncated[0].SHA256) != 64 {
		t.Fatalf("stub = %+v", stub)
	}
}

func TestStubFor(t *testing.T) {
	raw := []byte(`{"task_id":"t","session_id":"s","server":"fs","method":"tools/call","tool":"x","seq":3,"source":"o",` +
		`"arguments":[[[[1]]]],"weird":{"a":1},"started_at":"2026-01-01T00:00:00Z","is_error":true}`)
	stub := stubFor(raw)
	if !json.Valid(stub) {
		t.Fatalf("stub is not JSON: %s", stub)
	}
	var s hindsight.Step
	if err := json.Unmarshal(stub, &s); err != nil {
		t.Fatal(err)
	}
	if s.TaskID != "t" || s.Seq != 3 || s.Source != "o" || !s.IsError || s.Arguments != nil || strings.Contains(string(stub), "weird") ||
		s.Truncated[0].OriginalSize != len(raw) {
		t.Fatalf("stub %s", stub)
	}
}
