package memory

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestQuarantineBound: a list past its bound keeps the newest, in its
// file as in memory.
func TestQuarantineBound(t *testing.T) {
	q := newQuarantine(filepath.Join(t.TempDir(), QuarantineFile), quiet)
	q.mu.Lock()
	for i := range MaxQuarantined + 5 {
		q.entries[fmt.Sprint(i)] = Rejection{TaskID: fmt.Sprint(i), At: time.Unix(int64(i), 0)}
	}
	if err := q.save(); err != nil {
		t.Fatal(err)
	}
	q.mu.Unlock()
	again := newQuarantine(q.path, quiet)
	if list := again.list(); len(list) != MaxQuarantined || list[0].TaskID != fmt.Sprint(MaxQuarantined+4) {
		t.Errorf("kept %d, newest %+v", len(list), list[0])
	}
}
