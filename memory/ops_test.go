package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// opsRecorder applies ops by recording them, answering as an unreachable
// store while down is set and refusing the ids in refuse for good.
type opsRecorder struct {
	down   atomic.Bool
	refuse map[string]bool
	mu     sync.Mutex
	done   []string // "KIND ID…", in the order applied
	during func(op *Op)
}

func (r *opsRecorder) apply(ctx context.Context, op *Op) error {
	if r.down.Load() {
		return fmt.Errorf("put experience: %w: dial tcp: connection refused", hindsight.ErrStoreUnavailable)
	}
	if r.during != nil {
		r.during(op)
	}
	if len(op.IDs) > 0 && r.refuse[op.IDs[0]] {
		return fmt.Errorf("experience %s: %w", op.IDs[0], hindsight.ErrNotFound)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = append(r.done, fmt.Sprint(op.Kind, " ", op.IDs))
	return nil
}

func (r *opsRecorder) applied() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.done)
}

func openOpsDB(t *testing.T, dir string) *badger.DB {
	t.Helper()
	db, err := badger.Open(badgerdb.Options(dir, quiet).WithSyncWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func openOps(t *testing.T, db *badger.DB, r *opsRecorder) *Ops {
	t.Helper()
	o, err := newOps(db, quiet)
	if err != nil {
		t.Fatal(err)
	}
	o.Apply = r.apply
	return o
}

func enqueue(t *testing.T, o *Ops, ops ...Op) []uint64 {
	t.Helper()
	var seqs []uint64
	for _, op := range ops {
		seq, err := o.Enqueue(op)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// TestStoreOpsOrderSurvivesReopen: ops queued while the store is down are
// kept across a close and reopen of the database, and applied in the
// order they were queued, new ones after the old.
func TestStoreOpsOrderSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db := openOpsDB(t, dir)
	r := &opsRecorder{}
	r.down.Store(true)
	o := openOps(t, db, r)
	enqueue(t, o,
		Op{Kind: OpForget, IDs: []string{"a"}},
		Op{Kind: OpHits, Namespace: "ns", IDs: []string{"b", "c"}},
		Op{Kind: OpEdit, IDs: []string{"b"}, Edit: &EditRequest{Lesson: ptr("new text")}},
		Op{Kind: OpPurge, IDs: []string{"c"}},
	)
	if err := o.Drain(context.Background()); !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Fatalf("drain with the store down: %v", err)
	}
	st := o.Stats()
	if st.Depth != 4 || st.Oldest == nil || st.LastError == "" {
		t.Fatalf("stats with the store down: %+v", st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openOpsDB(t, dir)
	defer db.Close()
	o = openOps(t, db, r)
	if o.Depth() != 4 {
		t.Fatalf("after reopen: depth %d, want 4", o.Depth())
	}
	list, err := o.List()
	if err != nil {
		t.Fatal(err)
	}
	if list[2].Edit == nil || *list[2].Edit.Lesson != "new text" || list[1].Namespace != "ns" {
		t.Fatalf("ops lost their content across the reopen: %+v", list)
	}
	enqueue(t, o, Op{Kind: OpRestore, IDs: []string{"a"}})
	r.down.Store(false)
	if err := o.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"forget [a]", "hits [b c]", "edit [b]", "purge [c]", "restore [a]"}
	if got := r.applied(); !slices.Equal(got, want) {
		t.Fatalf("applied %q, want %q", got, want)
	}
	if st := o.Stats(); st.Depth != 0 || st.Oldest != nil || st.LastError != "" {
		t.Fatalf("stats after the drain: %+v", st)
	}
}

func ptr[T any](v T) *T { return &v }

// TestStoreOpsCoalesce: a forget followed by a restore of the same
// experience leaves one op with the last state; hits are never merged;
// an op being applied is never replaced.
func TestStoreOpsCoalesce(t *testing.T) {
	db := openOpsDB(t, t.TempDir())
	defer db.Close()
	r := &opsRecorder{}
	r.down.Store(true)
	o := openOps(t, db, r)
	seqs := enqueue(t, o,
		Op{Kind: OpForget, IDs: []string{"a"}},
		Op{Kind: OpRestore, IDs: []string{"a"}}, // replaces the forget
		Op{Kind: OpPin, IDs: []string{"a"}, Pinned: true},
		Op{Kind: OpPin, IDs: []string{"a"}, Pinned: false}, // replaces the pin
		Op{Kind: OpPin, Namespace: "other", IDs: []string{"a"}, Pinned: true},
		Op{Kind: OpHits, IDs: []string{"a"}},
		Op{Kind: OpHits, IDs: []string{"a"}},
	)
	if seqs[1] != seqs[0] || seqs[3] != seqs[2] || seqs[4] == seqs[3] || seqs[6] == seqs[5] {
		t.Fatalf("sequence numbers %v", seqs)
	}
	list, err := o.List()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, op := range list {
		kinds = append(kinds, fmt.Sprint(op.Kind, op.Pinned))
	}
	if want := []string{"restorefalse", "pinfalse", "pintrue", "hitsfalse", "hitsfalse"}; !slices.Equal(kinds, want) || o.Depth() != 5 {
		t.Fatalf("queue %q (depth %d), want %q", kinds, o.Depth(), want)
	}

	// A forget queued while the restore of the same experience is being
	// applied comes after it.
	db2 := openOpsDB(t, t.TempDir())
	defer db2.Close()
	r2 := &opsRecorder{}
	o2 := openOps(t, db2, r2)
	r2.down.Store(true)
	enqueue(t, o2, Op{Kind: OpRestore, IDs: []string{"x"}})
	r2.down.Store(false)
	var once sync.Once
	r2.during = func(op *Op) {
		once.Do(func() { enqueue(t, o2, Op{Kind: OpForget, IDs: []string{"x"}}) })
	}
	if err := o2.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := r2.applied(), []string{"restore [x]", "forget [x]"}; !slices.Equal(got, want) {
		t.Fatalf("applied %q, want %q", got, want)
	}
}

// TestStoreOpsDropsRefused: an op the store keeps refusing is dropped
// and counted; the ops after it wait for it, then apply.
func TestStoreOpsDropsRefused(t *testing.T) {
	db := openOpsDB(t, t.TempDir())
	defer db.Close()
	r := &opsRecorder{refuse: map[string]bool{"gone": true}}
	r.down.Store(true)
	o := openOps(t, db, r)
	o.RefusedGrace = time.Nanosecond
	enqueue(t, o, Op{Kind: OpForget, IDs: []string{"gone"}}, Op{Kind: OpForget, IDs: []string{"b"}})
	r.down.Store(false)
	// Refused twice, it stays first (a store that just came back may not
	// have loaded it yet); the third refusal drops it.
	for range 2 {
		if err := o.Drain(context.Background()); !errors.Is(err, errRefusedForNow) {
			t.Fatalf("drain: %v, want the op tried again", err)
		}
		if got := r.applied(); len(got) != 0 || o.Depth() != 2 {
			t.Fatalf("applied %q past a refused op (depth %d)", got, o.Depth())
		}
	}
	if err := o.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.applied(); !slices.Equal(got, []string{"forget [b]"}) {
		t.Fatalf("applied %q", got)
	}
	if st := o.Stats(); st.Depth != 0 || st.Dropped != 1 {
		t.Fatalf("stats %+v, want depth 0 and 1 dropped", st)
	}
}

// TestStoreOpsRunAppliesWhenBack: the background loop keeps trying while
// the store is unreachable and applies everything once it answers.
func TestStoreOpsRunAppliesWhenBack(t *testing.T) {
	db := openOpsDB(t, t.TempDir())
	defer db.Close()
	r := &opsRecorder{}
	r.down.Store(true)
	o := openOps(t, db, r)
	o.Backoff, o.MaxBackoff = time.Millisecond, 20*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	defer func() { cancel(); <-done }()
	enqueue(t, o, Op{Kind: OpHits, IDs: []string{"a"}}, Op{Kind: OpForget, IDs: []string{"a"}})
	testkit.WaitFor(t, "the condition", 10*time.Second, func() bool { return o.Stats().LastError != "" })
	r.down.Store(false)
	testkit.WaitFor(t, "the condition", 10*time.Second, func() bool { return o.Depth() == 0 })
	if got := r.applied(); !slices.Equal(got, []string{"hits [a]", "forget [a]"}) {
		t.Fatalf("applied %q", got)
	}
}

// TestStoreOpsBackoffCapped: the wait between tries doubles and stays
// within the cap (plus its jitter), and never gives up.
func TestStoreOpsBackoffCapped(t *testing.T) {
	o := &Ops{Backoff: 10 * time.Millisecond, MaxBackoff: 80 * time.Millisecond}
	b := o.newBackoff()
	var last time.Duration
	for i := range 40 {
		d := b.NextBackOff()
		if d < 0 {
			t.Fatalf("try %d: the backoff gave up", i)
		}
		if hi := time.Duration(float64(o.MaxBackoff) * (1 + b.RandomizationFactor)); d > hi {
			t.Fatalf("try %d: wait %v above the cap %v", i, d, hi)
		}
		last = d
	}
	if lo := time.Duration(float64(o.MaxBackoff) * (1 - b.RandomizationFactor)); last < lo {
		t.Fatalf("after 40 tries the wait is %v, below the cap's range (%v)", last, lo)
	}
}
