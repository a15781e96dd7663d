package daemon

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

func taskIDs(t *testing.T, c *Client) []string {
	t.Helper()
	tasks, err := c.Tasks(context.Background(), TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range tasks {
		ids = append(ids, task.ID)
	}
	slices.Sort(ids)
	return ids
}

func TestRetentionPass(t *testing.T) {
	ctx := context.Background()
	now := tasktest.T0.Add(40 * 24 * time.Hour)
	for _, tc := range []struct {
		name string
		ret  Retention
		want []string
	}{
		{"by age", Retention{}, []string{"mid", "new"}},
		{"kept for ever", Retention{Traces: -1, TracesMaxBytes: -1}, []string{"mid", "new", "old"}},
		{"by size", Retention{Traces: -1, TracesMaxBytes: 1}, []string{"new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{Retention: tc.ret}
			c := startServer(t, s)
			var steps []hindsight.Step
			for i, at := range map[string]time.Duration{"old": 0, "mid": 15 * 24 * time.Hour, "new": 39 * 24 * time.Hour} {
				steps = append(steps, tasktest.Explicit(tasktest.Stdio(tasktest.Step("src", uint64(len(steps)+1), at), "s-"+i, 100), i))
			}
			if err := c.Deliver(ctx, steps); err != nil {
				t.Fatal(err)
			}
			s.RetentionPass(ctx, now)
			if got := taskIDs(t, c); !slices.Equal(got, tc.want) {
				t.Errorf("tasks after retention = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRetentionSetAside(t *testing.T) {
	s := &Server{}
	startServer(t, s)
	root := s.Home.Outboxes()
	now := time.Now()
	files := map[string]time.Duration{ // path → age
		".rejected/old.jsonl":       40 * 24 * time.Hour,
		".rejected/new.jsonl":       time.Hour,
		".corrupt/ob1-123/db":       40 * 24 * time.Hour,
		"ob2/outbox.db.corrupt-5/x": 40 * 24 * time.Hour,
		"ob2/outbox.db":             40 * 24 * time.Hour, // a live outbox: never
		"ob3/outbox.db.corrupt-9/y": time.Hour,
	}
	for p, age := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		for q := full; q != root; q = filepath.Dir(q) {
			os.Chtimes(q, now.Add(-age), now.Add(-age))
		}
	}
	s.RetentionPass(context.Background(), now)
	for p, gone := range map[string]bool{
		".rejected/old.jsonl": true, ".rejected/new.jsonl": false, ".corrupt/ob1-123": true,
		"ob2/outbox.db.corrupt-5": true, "ob2/outbox.db": false, "ob3/outbox.db.corrupt-9": false,
	} {
		_, err := os.Stat(filepath.Join(root, p))
		if gotGone := os.IsNotExist(err); gotGone != gone {
			t.Errorf("%s: removed %v, want %v", p, gotGone, gone)
		}
	}
}
