package replay

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	tracecorpus "github.com/hindsight-proxy/hindsight/lab/corpus"
	"github.com/hindsight-proxy/hindsight/reflect"
)

// emptyStore holds nothing; an Overlay over it is an in-memory store.
type emptyStore struct{}

func (emptyStore) Put(context.Context, *hindsight.Experience) error { return nil }
func (emptyStore) Get(context.Context, string, string) (*hindsight.Experience, error) {
	return nil, hindsight.ErrNotFound
}
func (emptyStore) Search(context.Context, hindsight.Query) ([]hindsight.ScoredExperience, error) {
	return nil, nil
}
func (emptyStore) List(context.Context, hindsight.ListOptions) ([]hindsight.Experience, error) {
	return nil, nil
}
func (emptyStore) RecordHits(context.Context, string, []string, time.Time) error { return nil }
func (emptyStore) Close() error                                                  { return nil }

// taskMap is a TaskSource over the corpus.
type taskMap map[string]*hindsight.Task

func (m taskMap) Task(ctx context.Context, id string) (*hindsight.Task, error) {
	t, ok := m[id]
	if !ok {
		return nil, hindsight.ErrNotFound
	}
	c := *t
	c.Steps = append([]hindsight.Step(nil), t.Steps...)
	return &c, nil
}

func loadCorpus(t *testing.T) (taskMap, []string) {
	t.Helper()
	steps, _, err := tracecorpus.Load("../testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	tasks := taskMap{}
	var ids []string
	for _, s := range steps {
		task := tasks[s.TaskID]
		if task == nil {
			task = &hindsight.Task{ID: s.TaskID, StartedAt: s.StartedAt, Final: true}
			tasks[s.TaskID] = task
			ids = append(ids, s.TaskID)
		}
		task.Steps = append(task.Steps, s)
		task.EndedAt = s.EndedAt
	}
	return tasks, ids
}

// live returns the live experiences of s, sorted by tool and lesson.
func liveExperiences(t *testing.T, s hindsight.ExperienceStore) []hindsight.Experience {
	t.Helper()
	all, err := s.List(context.Background(), hindsight.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Tool != all[j].Tool {
			return all[i].Tool < all[j].Tool
		}
		return all[i].Lesson < all[j].Lesson
	})
	return all
}

// A dry run plans and changes nothing; applying changes the store as
// planned.
func TestReflectAgain(t *testing.T) {
	tasks, ids := loadCorpus(t)
	ctx := context.Background()
	store := NewOverlay(emptyStore{})
	p := &reflect.Pipeline{Reflector: reflect.Rules{}, Validator: &reflect.Validator{}, Merger: &reflect.Merger{Store: store}}

	// The first half of the corpus is reflected, as the daemon would.
	half := len(ids) / 2
	if _, err := ReflectAgain(ctx, ids[:half], ReflectOptions{Pipeline: p, Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
	before := liveExperiences(t, store)
	if len(before) == 0 {
		t.Fatal("the first half of the corpus taught nothing")
	}

	var progress [][2]int
	plan, err := ReflectAgain(ctx, ids, ReflectOptions{Pipeline: p, Tasks: tasks, DryRun: true,
		Progress: func(done, total int) { progress = append(progress, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	if after := liveExperiences(t, store); len(after) != len(before) || after[0].Version != before[0].Version {
		t.Fatalf("the dry run changed the store: %d experiences, %d before", len(after), len(before))
	}
	if len(progress) != len(ids)+1 || progress[len(progress)-1] != [2]int{len(ids), len(ids)} {
		t.Errorf("progress %v", progress)
	}
	counts := map[string]int{}
	for _, c := range plan.Changes {
		counts[c.Outcome]++
	}
	// Every class of the corpus recurs in both halves: the second half
	// reinforces what the first taught (it may add lessons too).
	if plan.Tasks != len(ids) || counts[reflect.Reinforced] == 0 {
		t.Fatalf("plan: %d tasks, outcomes %v", plan.Tasks, counts)
	}

	applied, err := ReflectAgain(ctx, ids, ReflectOptions{Pipeline: p, Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied.Changes) != len(plan.Changes) || len(applied.Left) != len(plan.Left) {
		t.Fatalf("applied %d changes (%d left), planned %d (%d left)", len(applied.Changes), len(applied.Left), len(plan.Changes), len(plan.Left))
	}
	for i, c := range applied.Changes {
		pc := plan.Changes[i]
		if c.Task != pc.Task || c.Outcome != pc.Outcome || c.Tool != pc.Tool || c.Lesson != pc.Lesson ||
			(c.Outcome == reflect.Reinforced && c.ID != pc.ID) {
			t.Errorf("change %d: applied %+v, planned %+v", i, c, pc)
		}
		// The store holds what the plan says.
		e, err := store.Get(ctx, hindsight.DefaultNamespace, c.ID)
		if err != nil || e.Lesson != c.Lesson {
			t.Errorf("change %d: stored %+v, %v", i, e, err)
		}
		if c.Superseded != "" {
			if old, err := store.Get(ctx, hindsight.DefaultNamespace, c.Superseded); err != nil || old.SupersededBy == "" {
				t.Errorf("change %d: %s not superseded: %+v, %v", i, c.Superseded, old, err)
			}
		}
	}
}
