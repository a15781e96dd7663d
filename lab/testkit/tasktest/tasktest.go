// Package tasktest gives tests recorded tasks: it loads them from JSON
// files (the golden traces under reflect/testdata) and serves them as a
// task source.
package tasktest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// Load reads the task in the JSON file at path, with StepCount set from
// its steps. It fails the test when the file cannot be read or decoded.
func Load(t testing.TB, path string) *hindsight.Task {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var task hindsight.Task
	if err := json.Unmarshal(b, &task); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	task.StepCount = len(task.Steps)
	return &task
}

// Map serves tasks by id, as reflection's task source does.
type Map map[string]*hindsight.Task

// Task returns the task id, or an error wrapping hindsight.ErrNotFound.
func (m Map) Task(ctx context.Context, id string) (*hindsight.Task, error) {
	t, ok := m[id]
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, hindsight.ErrNotFound)
	}
	return t, nil
}
