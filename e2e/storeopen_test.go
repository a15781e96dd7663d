//go:build unix

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

// TestDaemonStartsWithStoreDown: the real daemon binary starts while its
// Weaviate is down. It serves at once: status says the experience store is
// unavailable, a read answers 503, a forget is queued. Weaviate comes back
// on its data and ports: the store opens, the forget is applied and the
// queue empties.
func TestDaemonStartsWithStoreDown(t *testing.T) {
	skipWithoutWeaviate(t)
	exe := testbin.HindsightFull(t)
	wv := weaviatetest.Start(t)
	ctx := context.Background()
	// An experience stored before the outage, as the daemon stores them
	// (its default collection, namespace and embedder).
	st, err := weaviate.Open(ctx, weaviate.Config{URL: wv.URL, GRPC: wv.GRPC}, embedder.NewLocal(0))
	if err != nil {
		t.Fatal(err)
	}
	e := &hindsight.Experience{ID: "down-1", Server: "files", Tool: "upload", Lesson: "retry the upload with a smaller chunk size",
		Situation: "the gateway answered 413", Confidence: 0.8, SourceTask: "t1"}
	if err := st.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	st.Close()
	wv.Kill()

	home := weaviateHome(t, wv)
	dir := string(home)
	c, err := daemon.EnsureRunning(ctx, home, exe)
	if err != nil {
		t.Fatalf("start the daemon with the store down: %v", err)
	}
	if out := runCLI(t, exe, dir, "status"); !strings.Contains(out, "unavailable") {
		t.Fatalf("status with the store down does not say it is unavailable:\n%s", out)
	}
	_, err = c.Experiences(ctx, hindsight.ListOptions{})
	var ae *daemon.APIError
	if !errors.As(err, &ae) || ae.Status != 503 || !strings.Contains(ae.Message, "store unavailable") {
		t.Fatalf("list with the store not open: %v, want 503 store unavailable", err)
	}
	if out := runCLI(t, exe, dir, "experiences", "forget", e.ID); !strings.Contains(out, "queued: the store is unreachable; applied when it is back") {
		t.Fatalf("experiences forget with the store not open printed %q", out)
	}
	st2, err := c.Status(ctx)
	if err != nil || st2.StoreOps == nil || st2.StoreOps.Depth != 1 || st2.Experiences == nil || st2.Experiences.Available {
		t.Fatalf("status with a queued forget: %+v %+v, %v", st2.StoreOps, st2.Experiences, err)
	}

	wv.Start(t) // same data directory and ports
	eventually(t, "the store opened and the queue applied", 3*time.Minute, func() (bool, string) {
		st, err := c.Status(ctx)
		if err != nil || st.StoreOps == nil || st.Experiences == nil {
			return false, fmt.Sprint(err)
		}
		got, err := c.Experiences(ctx, hindsight.ListOptions{IncludeDeleted: true})
		deleted := err == nil && len(got) == 1 && got[0].ID == e.ID && got[0].Deleted
		return st.Experiences.Available && st.StoreOps.Depth == 0 && deleted,
			fmt.Sprintf("experiences %+v, queue %+v, forget applied %v (%v)", *st.Experiences, *st.StoreOps, deleted, err)
	})
}
