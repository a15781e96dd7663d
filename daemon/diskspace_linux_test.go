package daemon

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/traces"
	"github.com/hindsight-proxy/hindsight/wire"
)

// TestSpaceGuardFollowsRotation ingests steps through the handler into a
// trace store whose memtable and value logs are small enough to rotate,
// and checks, after the guard's periodic check that follows each batch,
// that the newest of each has its blocks allocated spaceAhead past where
// its first hole was (Badger's write position, or past it when the kernel
// holds pages read ahead there), up to its size: the guard follows Badger
// to its new files and along them.
func TestSpaceGuardFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "traces")
	st, err := traces.Open(db, traces.Options{IdleGap: 10 * time.Minute, Logger: quiet, Now: tasktest.NewClock(tasktest.T0).Now,
		Badger: func(o *badger.Options) { *o = o.WithMemTableSize(1 << 20).WithValueLogFileSize(8 << 20) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := &SpaceGuard{Dir: dir, Reserve: 1, Logger: quiet}
	srv := &Server{Traces: st, Logger: quiet, Space: g}
	seen := map[string]bool{}
	rotated := func() bool {
		n := map[string]int{}
		for name := range seen {
			n[filepath.Ext(name)]++
		}
		return n[".mem"] > 1 && n[".vlog"] > 1
	}
	seq := uint64(1)
	for i := 0; i < 2000 && !rotated(); i++ {
		body := tasktest.BatchJSON(t, echoBatch("guard", seq, 64), wire.AppendCompactStep)
		seq += 64
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/steps/compact", bytes.NewReader(body)))
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		newest := newestLogs(t, db)
		before := map[string]int64{}
		for _, name := range newest {
			before[name], _, _ = extents(t, filepath.Join(db, name))
		}
		if err := g.check(0, true); err != nil { // as Run does every second
			t.Fatal(err)
		}
		for _, name := range newest {
			seen[name] = true
			hole := before[name]
			_, size, allocated := extents(t, filepath.Join(db, name))
			if want := hole + min(spaceAhead, size-hole); allocated < want {
				if allocated <= hole {
					t.Skipf("the filesystem did not allocate ahead (%d bytes for %d written)", allocated, hole)
				}
				t.Fatalf("batch %d: %s has %d bytes allocated, its first hole was at %d: want %d (logs seen: %v)", i, name, allocated, hole, want, seen)
			}
		}
	}
	if !rotated() {
		t.Fatalf("the logs did not rotate: %v", seen)
	}
}

// newestLogs returns the name of the newest .mem and .vlog in dir.
func newestLogs(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	newest := map[string]string{}
	for _, e := range ents {
		name, ext := e.Name(), filepath.Ext(e.Name())
		if ext == ".mem" || ext == ".vlog" {
			if cur := newest[ext]; len(name) > len(cur) || (len(name) == len(cur) && name > cur) {
				newest[ext] = name
			}
		}
	}
	return newest
}

// extents returns path's first hole (looked for from its start), its size
// and the bytes of it allocated.
func extents(t *testing.T, path string) (hole, size, allocated int64) {
	t.Helper()
	fd, err := syscall.Open(path, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if hole, err = syscall.Seek(fd, 0, 4); err != nil { // SEEK_HOLE
		t.Fatal(err)
	}
	return hole, st.Size, st.Blocks * 512
}
