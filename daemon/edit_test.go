package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/memory"
)

// TestEditAndUI: an edit is the next version with origin manual, refused
// for a stale version, a missing id or an empty lesson; POST /v1/ui answers
// the hook's URL, or 503 without one.
func TestEditAndUI(t *testing.T) {
	ctx := context.Background()
	st := openEmbedded(t)
	e := hindsight.Experience{ID: "e1", Server: "fs", Lesson: "old", Situation: "s", Origin: "llm", Confidence: 0.8}
	if err := st.Put(ctx, &e); err != nil {
		t.Fatal(err)
	}
	s := &Server{Store: st, Tick: time.Hour}
	c := startServer(t, s)
	text := func(v string) *string { return &v }
	if _, err := c.Edit(ctx, "e1", EditRequest{Version: 0, Lesson: text("x")}); !errors.Is(err, hindsight.ErrConflict) {
		t.Errorf("stale version: %v, want a conflict", err)
	}
	if _, err := c.Edit(ctx, "nope", EditRequest{Version: 1, Lesson: text("x")}); !errors.Is(err, hindsight.ErrNotFound) {
		t.Errorf("unknown id: %v, want not found", err)
	}
	if _, err := c.Edit(ctx, "e1", EditRequest{Version: 1, Lesson: text("  ")}); !errors.Is(err, ErrRejected) {
		t.Errorf("empty lesson: %v, want rejected", err)
	}
	if _, err := c.Edit(ctx, "e1", EditRequest{Version: 1, Confidence: new(1.5)}); !errors.Is(err, ErrRejected) {
		t.Errorf("confidence 1.5: %v, want rejected", err)
	}
	got, err := c.Edit(ctx, "e1", EditRequest{Version: 1, Lesson: text(" new "), Confidence: new(0.4)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || got.Origin != memory.EditOrigin || got.Lesson != "new" || got.Situation != "s" || got.Confidence != 0.4 {
		t.Errorf("edited: %+v", got)
	}
	if _, err := c.UI(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no UI: %v, want unavailable", err)
	}
	s2 := &Server{Tick: time.Hour, UI: func(context.Context) (string, error) { return "http://127.0.0.1:1/?token=t", nil }}
	if u, err := startServer(t, s2).UI(ctx); err != nil || u != "http://127.0.0.1:1/?token=t" {
		t.Errorf("UI: %q, %v", u, err)
	}
}

// TestPin: a pinned experience comes first in a search with include_pinned
// for its server, beyond k and whatever its rank; a forgotten one does not.
func TestPin(t *testing.T) {
	ctx := context.Background()
	st := openEmbedded(t)
	for _, e := range []hindsight.Experience{
		{ID: "top", Server: "fs", Lesson: "List the directory before reading a file.", Confidence: 0.9, EvidenceCount: 5},
		{ID: "low", Server: "fs", Lesson: "Quote paths with spaces.", Confidence: 0.2},
		{ID: "gone", Server: "fs", Lesson: "Old advice.", Confidence: 0.2, Pinned: true, Deleted: true},
		{ID: "other", Server: "web", Lesson: "Another server's.", Confidence: 0.2, Pinned: true},
	} {
		if err := st.Put(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	c := startServer(t, &Server{Store: st, Tick: time.Hour})
	ids := func(q hindsight.Query) []string {
		t.Helper()
		res, err := c.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range res {
			out = append(out, e.ID)
		}
		return out
	}
	q := hindsight.Query{Server: "fs", K: 1, NoHit: true, IncludePinned: true}
	if got := ids(q); len(got) != 1 || got[0] != "top" {
		t.Fatalf("before pinning: %v", got)
	}
	e, err := c.Pin(ctx, "", "low", true)
	if err != nil || !e.Pinned || e.Version != 2 {
		t.Fatalf("pin: %+v, %v", e, err)
	}
	if got := ids(q); len(got) != 2 || got[0] != "low" || got[1] != "top" {
		t.Errorf("pinned: %v, want low first, then top", got)
	}
	q.IncludePinned = false
	if got := ids(q); len(got) != 1 || got[0] != "top" {
		t.Errorf("without include_pinned: %v", got)
	}
	if e, err := c.Pin(ctx, "", "low", false); err != nil || e.Pinned {
		t.Fatalf("unpin: %+v, %v", e, err)
	}
	q.IncludePinned = true
	if got := ids(q); len(got) != 1 || got[0] != "top" {
		t.Errorf("unpinned: %v", got)
	}
}

// TestConcurrentWrites: a pin and a forget of one experience at the same
// time both succeed and are both kept, though each read the version the
// other replaced: writes that carry no version read again on a conflict.
func TestConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	st := openEmbedded(t)
	if err := st.Put(ctx, &hindsight.Experience{ID: "e1", Server: "fs", Lesson: "old", Confidence: 0.8}); err != nil {
		t.Fatal(err)
	}
	c := startServer(t, &Server{Store: st, Tick: time.Hour})
	for round := range 20 {
		on := round%2 == 0
		errs := make(chan error, 2)
		go func() { _, err := c.Pin(ctx, "", "e1", on); errs <- err }()
		go func() {
			var err error
			if on {
				_, err = c.Forget(ctx, "", "e1")
			} else {
				_, err = c.Restore(ctx, "", "e1")
			}
			errs <- err
		}()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		got, err := c.Experience(ctx, "", "e1")
		if err != nil || got.Pinned != on || got.Deleted != on {
			t.Fatalf("round %d: pinned %v, deleted %v (%v); want both %v", round, got.Pinned, got.Deleted, err, on)
		}
	}
}
