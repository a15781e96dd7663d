package embedded

import (
	"io"
	"log/slog"
	"testing"

	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// TestOpenDaemonOptions: the store the daemon opens has the daemon's small
// memtables and caches, not Badger's defaults (64 MB memtables, a 256 MB
// block cache), synchronous writes, the store's value threshold, and no
// compactors of Badger's own (a badgerdb.Compactor, which Close stops).
func TestOpenDaemonOptions(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := OpenDaemon(t.TempDir(), embedder.NewLocal(0), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	want := badgerdb.Options("", quiet)
	o := s.db.Opts()
	if o.MemTableSize != want.MemTableSize || o.NumMemtables != want.NumMemtables ||
		o.BlockCacheSize != want.BlockCacheSize || o.IndexCacheSize != want.IndexCacheSize || !o.SyncWrites {
		t.Errorf("memtable %d×%d, block cache %d, index cache %d, sync %v; want %d×%d, %d, %d, sync",
			o.MemTableSize, o.NumMemtables, o.BlockCacheSize, o.IndexCacheSize, o.SyncWrites,
			want.MemTableSize, want.NumMemtables, want.BlockCacheSize, want.IndexCacheSize)
	}
	if o.NumCompactors != 0 || s.compactor == nil {
		t.Errorf("%d compactors of Badger's own, compactor %v; want none, and a badgerdb.Compactor", o.NumCompactors, s.compactor)
	}
	if o.MemTableSize > 16<<20 || o.BlockCacheSize > 16<<20 {
		t.Errorf("memtable %d, block cache %d: not memory-conscious", o.MemTableSize, o.BlockCacheSize)
	}
	if o.ValueThreshold != ValueThreshold {
		t.Errorf("value threshold %d; want %d", o.ValueThreshold, ValueThreshold)
	}
	if o.NumLevelZeroTablesStall != levelZeroStall {
		t.Errorf("writes stall at %d level-0 tables; want %d", o.NumLevelZeroTablesStall, levelZeroStall)
	}
	end := s.BeginBulk()
	if !s.compactor.Held() {
		t.Error("an import (BeginBulk) does not hold the compactor back")
	}
	end()
	if s.compactor.Held() {
		t.Error("the compactor is still held after the import's end")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !s.db.IsClosed() {
		t.Error("Close left the database open")
	}
}
