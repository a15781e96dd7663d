package reflect

import (
	"context"
	"fmt"

	"github.com/hindsight-proxy/hindsight"
)

// taskMap is a TaskSource over tasks in memory.
type taskMap map[string]*hindsight.Task

func (m taskMap) Task(ctx context.Context, id string) (*hindsight.Task, error) {
	t, ok := m[id]
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, hindsight.ErrNotFound)
	}
	return t, nil
}
