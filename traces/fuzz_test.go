package traces

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// stepBatch is the body of a step batch, decoded as encoding/json does.
type stepBatch struct {
	Steps []hindsight.Step `json:"steps"`
}

// FuzzIngest feeds arbitrary step batches (JSON, as a sidecar sends them)
// to a real trace store: a batch is refused or stored; stored twice, it is
// not duplicated; every task's step indices stay gap-free.
func FuzzIngest(f *testing.F) {
	seed, _ := json.Marshal(stepBatch{Steps: goldenSteps()})
	f.Add(seed)
	f.Add([]byte(`{"steps":[{"source":"a","seq":1},{"source":"a","seq":1},{"source":"b","seq":0,"session_id":"s","explicit_task":"x/y"}]}`))
	f.Add([]byte(`{"steps":[{"source":"a","seq":18446744073709551615,"host_pid":-3,"started_at":"0001-01-01T00:00:00Z","ended_at":"9999-12-31T23:59:59Z"}]}`))
	f.Add([]byte(`{"steps":[{"source":"","seq":1}]}`))
	st := openTestStore(f, f.TempDir(), tasktest.NewClock(t0))
	defer st.Close()
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		var b stepBatch
		if json.Unmarshal(data, &b) != nil || len(b.Steps) > 64 {
			return
		}
		res, err := st.Ingest(ctx, b.Steps)
		if err != nil {
			return
		}
		again, err := st.Ingest(ctx, b.Steps)
		if err != nil || again.Accepted != 0 || again.Duplicates != len(b.Steps) {
			t.Fatalf("redelivery: %+v, %v (first: %+v)", again, err, res)
		}
		tasks, err := st.Tasks(ctx, TaskFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			i := 0
			err := st.Steps(ctx, []string{task.ID}, func(s *hindsight.Step) error {
				if s.StepIndex != i || s.TaskID != task.ID {
					t.Fatalf("task %s: step %d has index %d, task %s", task.ID, i, s.StepIndex, s.TaskID)
				}
				i++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if i != task.StepCount {
				t.Fatalf("task %s: %d steps stored, count says %d", task.ID, i, task.StepCount)
			}
		}
	})
}
