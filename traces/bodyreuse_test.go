package traces

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/wire"
)

// TestIngestBatchKeepsNoBody ingests batches each decoded from a body that
// the next batch's body then overwrites (the daemon reuses its request
// buffers), and compares the store with one whose bodies stayed: what a
// store caches between batches (high-water marks, latest tasks, session
// closes) holds nothing of a body once IngestBatch returned.
func TestIngestBatchKeepsNoBody(t *testing.T) {
	ctx := context.Background()
	reused := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	defer reused.Close()
	kept := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	defer kept.Close()
	buf := make([]byte, 0, 1<<20)
	seqs := map[string]uint64{}
	for i := range 12 {
		var steps []hindsight.Step
		for j := range 8 {
			src := fmt.Sprintf("src%d", (i+j)%3)
			seqs[src]++
			s := stdio(step(src, seqs[src], time.Duration(i*8+j)*time.Second), fmt.Sprintf("sess-%s-%d", src, i/4), 100+(i+j)%3)
			s.Server = fmt.Sprintf("server%d", j%2)
			steps = append(steps, s)
		}
		body := tasktest.BatchJSON(t, steps, wire.AppendCompactStep)
		buf = append(buf[:0], body...) // the previous batch's body, overwritten
		for k := len(buf); k < cap(buf) && k < len(body)+4096; k++ {
			buf = append(buf, 'x')
		}
		for _, c := range []struct {
			st   *Store
			body []byte
		}{{reused, buf[:len(body)]}, {kept, body}} {
			b, err := DecodeBatch(c.body)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.st.IngestBatch(ctx, b); err != nil {
				t.Fatal(err)
			}
			if i%4 == 3 {
				last := seqs["src0"]
				if _, err := c.st.CloseSession(ctx, fmt.Sprintf("sess-src0-%d", i/4), "src0", &last); err != nil {
					t.Fatal(err)
				}
			}
		}
		for k := range buf[:cap(buf)] {
			buf[:cap(buf)][k] = '#'
		}
	}
	for src := range reused.hw {
		if !strings.HasPrefix(src, "src") {
			t.Errorf("high-water mark of source %q: a view of a body", src)
		}
	}
	for group := range reused.latest {
		if strings.Contains(group, "#") {
			t.Errorf("latest task of group %q: a view of a body", group)
		}
	}
	for sid := range reused.closes {
		if !strings.HasPrefix(sid, "sess-") {
			t.Errorf("close of session %q: a view of a body", sid)
		}
	}
	got, want := dump(t, reused), dump(t, kept)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("with bodies reused:\n%s\nwith bodies kept:\n%s", got, want)
	}
}

// dump is st's tasks, with their steps, as JSON, ordered by their first
// steps and named by their order.
func dump(t *testing.T, st *Store) string {
	t.Helper()
	ctx := context.Background()
	tasks, err := st.Tasks(ctx, TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*hindsight.Task
	for _, task := range tasks {
		full, err := st.Task(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, full)
	}
	first := func(task *hindsight.Task) string {
		if len(task.Steps) == 0 {
			return ""
		}
		return fmt.Sprintf("%s/%09d", task.Steps[0].Source, task.Steps[0].Seq)
	}
	slices.SortFunc(out, func(a, b *hindsight.Task) int { return strings.Compare(first(a), first(b)) })
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i, task := range out { // task ids are random
		s = strings.ReplaceAll(s, task.ID, fmt.Sprintf("task-%d", i))
	}
	return s
}
