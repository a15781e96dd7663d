package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/reflect"
)

// TestReflectionQueueMigrates: a home of the layout where the reflection
// queue had a Badger database of its own (daemon/reflect) starts with the
// queue's entries in the trace store, and the old directory gone.
func TestReflectionQueueMigrates(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	home := hindsight.Home(t.TempDir())
	g := &globals{home: home, config: &Config{}}
	oldDir := filepath.Join(home.DaemonData(), "reflect")

	// The previous layout: the queue's own database, as the daemon opened it.
	old, err := badger.Open(badgerdb.Options(oldDir, quiet).WithNumCompactors(2))
	if err != nil {
		t.Fatal(err)
	}
	oq := reflect.NewQueue(old, nil, nil)
	for _, id := range []string{"done-task", "pending-task"} {
		if err := oq.Enqueue(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	_, _, q := openReflection(t, ctx, g, quiet)
	for _, id := range []string{"done-task", "pending-task"} {
		e, err := q.(daemonQueue).Entry(ctx, id)
		if err != nil {
			t.Fatalf("%s after the migration: %v", id, err)
		}
		if e.TaskID != id {
			t.Errorf("entry of %s names %s", id, e.TaskID)
		}
	}
	for _, dir := range []string{oldDir, oldDir + ".old"} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still there after the migration (%v)", dir, err)
		}
	}
}
