package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/memory"
	"github.com/hindsight-proxy/hindsight/traces"
)

func ptr[T any](v T) *T { return &v }

// TestAPIStoreWritesQueued: while writes wait for the store, forget, edit
// and search hits are answered 202 (the client's QueuedError) and shown in
// the status; once the store takes them they are applied in order to the
// real embedded store.
func TestAPIStoreWritesQueued(t *testing.T) {
	ctx := context.Background()
	home := hindsight.Home(testkit.ShortTempDir(t))
	traces, err := traces.Open(home.Path("traces"), traces.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { traces.Close() })
	ops, err := memory.NewOps(traces, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ops.Backoff, ops.MaxBackoff = time.Millisecond, 10*time.Millisecond
	srv := &Server{Traces: traces, Store: openEmbedded(t), StoreName: "embedded", StoreOps: ops, HitFlush: 10 * time.Millisecond}
	var down atomic.Bool
	down.Store(true)
	ops.Apply = func(ctx context.Context, op *StoreOp) error {
		if down.Load() {
			return fmt.Errorf("%w: connection refused", hindsight.ErrStoreUnavailable)
		}
		return srv.mem.Apply(ctx, op)
	}
	c := startServer(t, srv)
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if _, err := c.Import(ctx, strings.NewReader(tasktest.ExperienceLine("e1", "read_file", "Call read_file with an absolute path under /data.", day))); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Enqueue(StoreOp{Kind: memory.OpHits, IDs: []string{"e1"}}); err != nil {
		t.Fatal(err)
	}
	var q *QueuedError
	if _, err := c.Forget(ctx, "", "e1"); !errors.As(err, &q) || q.Op == 0 {
		t.Fatalf("forget while writes wait: %v, want a QueuedError", err)
	}
	if _, err := c.Edit(ctx, "e1", EditRequest{Lesson: ptr("Use absolute paths under /data with read_file.")}); !errors.As(err, &q) {
		t.Fatalf("edit while writes wait: %v, want a QueuedError", err)
	}
	if _, err := c.Edit(ctx, "e1", EditRequest{Lesson: ptr("  ")}); !errors.Is(err, ErrRejected) {
		t.Fatalf("an empty lesson is queued: %v", err)
	}
	if found, err := c.Search(ctx, hindsight.Query{Text: "read_file absolute path", K: 3}); err != nil || len(found) != 1 {
		t.Fatalf("search: %v, %v", found, err)
	}
	// The search's hit waits in memory, then joins the queue behind the
	// writes waiting.
	testkit.WaitFor(t, "the search's hit queued", 10*time.Second, func() bool { return ops.Depth() == 4 })
	st, err := c.Status(ctx)
	if err != nil || st.StoreOps == nil || st.StoreOps.Depth != 4 || st.StoreOps.Oldest == nil {
		t.Fatalf("status: %+v, %v", st.StoreOps, err)
	}
	resp, err := c.do(ctx, http.MethodGet, "/../metrics", nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "hindsight_daemon_store_ops_queued 4") {
		t.Errorf("metrics lack the queue's depth:\n%s", b)
	}
	e, _ := c.Experience(ctx, "", "e1")
	if e.Deleted || e.HitCount != 0 {
		t.Fatalf("applied before the store was back: %+v", e)
	}
	down.Store(false)
	ops.Kick()
	testkit.WaitFor(t, "the condition", 10*time.Second, func() bool { return ops.Depth() == 0 })
	e, err = c.Experience(ctx, "", "e1")
	if err != nil || !e.Deleted || e.HitCount != 2 || e.Origin != memory.EditOrigin || e.Lesson != "Use absolute paths under /data with read_file." {
		t.Fatalf("after the drain: %+v, %v", e, err)
	}
	// With nothing waiting, a write applies at once.
	if e, err := c.Restore(ctx, "", "e1"); err != nil || e.Deleted {
		t.Fatalf("restore: %+v, %v", e, err)
	}
}
