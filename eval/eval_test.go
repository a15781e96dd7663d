package eval

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const corpusDir = "../testdata/corpus"

// TestCorpus is the learning loop's acceptance test on the development
// corpus: nothing stored quotes one task's values, and what is appended to
// unseen failing calls is about their error (precision) for most calls
// whose error was seen while learning (recall).
func TestCorpus(t *testing.T) {
	steps, labels, err := Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	if labels == nil {
		t.Fatal("no labels beside the corpus")
	}
	rep, err := Run(context.Background(), steps, labels, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *rep)
	if rep.LearnTasks != rep.Tasks/2 || rep.Truth != "labels" {
		t.Errorf("split %d/%d, truth %s", rep.LearnTasks, rep.Tasks, rep.Truth)
	}
	if rep.LessonsStored < 8 {
		t.Errorf("%d lessons stored; the corpus has 16 error classes", rep.LessonsStored)
	}
	if rep.LessonsOneOff != 0 {
		t.Errorf("%d lessons quote one-off values: %q", rep.LessonsOneOff, rep.OneOffExamples)
	}
	if rep.Precision < 0.8 {
		t.Errorf("precision %.3f < 0.8: %q", rep.Precision, rep.Irrelevant)
	}
	if rep.Recall < 0.6 {
		t.Errorf("recall %.3f < 0.6", rep.Recall)
	}
	for _, l := range rep.Lessons {
		if strings.Contains(l.Lesson, "think") {
			t.Errorf("a no-op tool became part of a lesson: %s", l.Lesson)
		}
	}
	again, err := Run(context.Background(), steps, labels, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(rep)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Errorf("not deterministic:\n%s\n%s", a, b)
	}
}

// TestTemplatesAsTruth runs without labels: the template clusters of all
// failures decide what an error is, and the gates still hold.
func TestTemplatesAsTruth(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(corpusDir, "traces.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "export.jsonl"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	steps, labels, err := Load(filepath.Join(dir, "export.jsonl"))
	if err != nil || labels != nil {
		t.Fatalf("labels %v, err %v", labels, err)
	}
	rep, err := Run(context.Background(), steps, nil, Options{Learn: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Truth != "templates" || rep.Precision < 0.8 || rep.LessonsOneOff != 0 {
		t.Errorf("%+v", *rep)
	}
}

// TestLoadErrors names the line of a bad step.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"bad.jsonl":     "{\"task_id\":\"a\",\"step_index\":0}\nnot json\n",
		"notask.jsonl":  "{\"step_index\":0}\n",
		"empty.jsonl":   "\n\n",
		"twotask.jsonl": "{\"task_id\":\"a\"}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{"bad.jsonl": "bad.jsonl:2", "notask.jsonl": "without task_id", "empty.jsonl": "no steps"} {
		_, _, err := Load(filepath.Join(dir, name))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	steps, _, err := Load(filepath.Join(dir, "twotask.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), steps, nil, Options{}); err == nil || !strings.Contains(err.Error(), "need at least 2") {
		t.Errorf("one task: %v", err)
	}
}

// TestTasksOrder groups and orders steps as the split needs.
func TestTasksOrder(t *testing.T) {
	steps, _, err := Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	tasks := Tasks(steps)
	for i := 1; i < len(tasks); i++ {
		if tasks[i].StartedAt.Before(tasks[i-1].StartedAt) {
			t.Fatalf("task %d starts before task %d", i, i-1)
		}
	}
	for _, task := range tasks {
		var idx []int
		for _, s := range task.Steps {
			idx = append(idx, s.StepIndex)
		}
		want := make([]int, len(idx))
		for i := range want {
			want[i] = i
		}
		if !reflect.DeepEqual(idx, want) {
			t.Fatalf("task %s steps %v", task.ID, idx)
		}
	}
}

// realCorpora are the converted public trajectories under testdata (see
// their README.md files), and the synthetic corpus: each is held to the
// learning gates of real runs.
var realCorpora = []string{"../testdata/livemcpbench", "../testdata/toolbench", corpusDir}

// TestRealCorpora holds every committed corpus to the gates: no stored
// lesson quotes one task's values or only restates its error, at least
// 0.9 of the lines appended to unseen failures are about their error, and
// at least 0.6 of the unseen failures whose error was seen while learning
// got one.
func TestRealCorpora(t *testing.T) {
	for _, dir := range realCorpora {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			steps, labels, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if labels == nil {
				t.Fatal("no frozen labels beside the corpus")
			}
			rep, err := Run(context.Background(), steps, labels, Options{NoSeenOnce: os.Getenv("NO_SEEN_ONCE") != ""})
			if err != nil {
				t.Fatal(err)
			}
			lessons := rep.Lessons
			rep.Lessons = nil
			b, _ := json.MarshalIndent(rep, "", " ")
			t.Logf("%s", b)
			if rep.LessonsOneOff != 0 {
				t.Errorf("%d lessons quote one-off values: %q", rep.LessonsOneOff, rep.OneOffExamples)
			}
			if rep.VacuousStored != 0 {
				t.Errorf("%d vacuous lessons stored", rep.VacuousStored)
			}
			if rep.Precision < 0.9 {
				t.Errorf("precision %.3f < 0.9: %q", rep.Precision, rep.Irrelevant)
			}
			if rep.Recall < 0.6 {
				t.Errorf("recall %.3f < 0.6 (%d of %d)", rep.Recall, rep.KnownHelped, rep.KnownFailures)
			}
			if t.Failed() {
				for _, l := range lessons {
					t.Logf("%d/%.2f %s: %s", l.EvidenceCount, l.Confidence, l.Tool, l.Lesson)
				}
			}
		})
	}
}
