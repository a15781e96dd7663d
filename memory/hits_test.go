package memory

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/traces"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestHitsLostInCrashCounted: hits a daemon held when it died are counted
// lost by the next one on the same trace database; those flushed are not.
func TestHitsLostInCrashCounted(t *testing.T) {
	dir := testkit.ShortTempDir(t)
	open := func() *traces.Store {
		st, err := traces.Open(filepath.Join(dir, "traces"), traces.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	tr := open()
	q := newHitQueue(tr.DB())
	q.add("default", []string{"a", "b"}, time.Now())
	q.flush(func(string, []string, time.Time) error { return nil })
	q.add("default", []string{"a", "c", "d"}, time.Now())
	if err := tr.Close(); err != nil { // the daemon dies without flushing
		t.Fatal(err)
	}
	tr = open()
	defer tr.Close()
	if n := newHitQueue(tr.DB()).recover(); n != 3 {
		t.Fatalf("hits counted lost after a crash: %d, want 3", n)
	}
	q = newHitQueue(tr.DB())
	if n := q.recover(); n != 0 {
		t.Fatalf("lost hits counted twice: %d", n)
	}
	// Hits the store refuses at a flush are lost too, and counted.
	q.add("default", []string{"a", "b"}, time.Now())
	q.flush(func(string, []string, time.Time) error { return errors.New("refused") })
	if n := testutil.ToFloat64(q.lost); n != 2 {
		t.Fatalf("hits refused at a flush counted lost: %v, want 2", n)
	}
}
