package cli

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
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

	traces, err := tracestore.Open(filepath.Join(home.DaemonData(), "traces"), tracestore.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer traces.Close()
	store, _, err := openExperienceStore(ctx, g, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	q, closer, err := newReflectionQueue(ctx, g, traces, store, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
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
	for name, db := range map[string]*badger.DB{
		"traces": traces.DB(),
	} {
		o := db.Opts()
		if o.MemTableSize != want.MemTableSize || o.NumMemtables != want.NumMemtables ||
			o.BlockCacheSize != want.BlockCacheSize || o.IndexCacheSize != want.IndexCacheSize ||
			o.SyncWrites != (name != "traces") {
			t.Errorf("%s: memtable %d×%d, block cache %d, index cache %d, sync %v; want %d×%d, %d, %d, sync %v",
				name, o.MemTableSize, o.NumMemtables, o.BlockCacheSize, o.IndexCacheSize, o.SyncWrites,
				want.MemTableSize, want.NumMemtables, want.BlockCacheSize, want.IndexCacheSize, name != "traces")
		}
		if o.NumCompactors != 0 {
			t.Errorf("%s: %d compactors of Badger's own; want none (a badgerdb.Compactor)", name, o.NumCompactors)
		}
		if o.MemTableSize > 16<<20 || o.BlockCacheSize > 16<<20 {
			t.Errorf("%s: memtable %d, block cache %d: not memory-conscious", name, o.MemTableSize, o.BlockCacheSize)
		}
	}
}
