package cli

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	tracestore "github.com/hindsight-proxy/hindsight/traces"
)

// TestDaemonBadgerOptions: every Badger database the daemon opens (traces
// with the reflection queue, the embedded experience store) has the
// daemon's small memtables and caches, not Badger's defaults (64 MB
// memtables, a 256 MB block cache), and no compactors of Badger's own.
// Writes are synchronous except in the trace store, which syncs on a timer
// (traces.Store). The queue keeps its keys in the trace store. The
// experience store opens its own database (embedded.OpenDaemon, whose
// options store/embedded's tests check the same way).
func TestDaemonBadgerOptions(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	home := hindsight.Home(t.TempDir())
	g := &globals{home: home, config: &Config{}}

	traces, store, q := openReflection(t, ctx, g, quiet)
	if err := q.(daemonQueue).Enqueue(ctx, "task-1"); err != nil {
		t.Fatal(err)
	}
	if err := traces.DB().View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte("reflectq/pending/task-1"))
		return err
	}); err != nil {
		t.Errorf("the queue's entry is not in the trace store: %v", err)
	}

	if _, ok := store.(*embedded.Store); !ok {
		t.Errorf("experience store %T; want the embedded store", store)
	}
	want := badgerdb.Options("", quiet)
	o := traces.DB().Opts()
	if o.MemTableSize != want.MemTableSize || o.NumMemtables != want.NumMemtables ||
		o.BlockCacheSize != want.BlockCacheSize || o.IndexCacheSize != want.IndexCacheSize || o.SyncWrites {
		t.Errorf("traces: memtable %d×%d, block cache %d, index cache %d, sync %v; want %d×%d, %d, %d, sync false",
			o.MemTableSize, o.NumMemtables, o.BlockCacheSize, o.IndexCacheSize, o.SyncWrites,
			want.MemTableSize, want.NumMemtables, want.BlockCacheSize, want.IndexCacheSize)
	}
	if o.NumCompactors != 0 {
		t.Errorf("traces: %d compactors of Badger's own; want none (a badgerdb.Compactor)", o.NumCompactors)
	}
	if o.MemTableSize > 16<<20 || o.BlockCacheSize > 16<<20 {
		t.Errorf("traces: memtable %d, block cache %d: not memory-conscious", o.MemTableSize, o.BlockCacheSize)
	}
}

// openReflection opens the daemon's trace store, experience store and
// reflection queue in g's home as the daemon does, closed (in reverse) when
// t ends.
func openReflection(t *testing.T, ctx context.Context, g *globals, logger *slog.Logger) (*tracestore.Store, hindsight.ExperienceStore, daemon.ReflectionQueue) {
	t.Helper()
	traces, err := tracestore.Open(filepath.Join(g.home.DaemonData(), "traces"), tracestore.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { traces.Close() })
	store, _, err := openExperienceStore(ctx, g, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	q, closer, err := newReflectionQueue(ctx, g, traces, store, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return traces, store, q
}
