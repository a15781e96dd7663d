package inject

import "github.com/hindsight-proxy/hindsight"

// Helped returns the ids of the experiences shown to the agent in task (as
// recorded in its steps' Injected) when the task then succeeded: it made at
// least one tool call to a server, and the last call of every tool
// succeeded. Reflection adds a hit to each (ExperienceStore.RecordHits), so
// lessons that keep helping rank higher. It returns nil when the task
// failed or nothing was shown.
func Helped(task *hindsight.Task) []string {
	if task == nil {
		return nil
	}
	var ids []string
	seen := map[string]bool{}
	last := map[string]bool{} // tool → its last call failed
	for i := range task.Steps {
		s := &task.Steps[i]
		for _, inj := range s.Injected {
			for _, id := range inj.ExperienceIDs {
				if !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
		}
		if s.Method == "tools/call" && !s.Local && s.Direction != hindsight.ServerToClient && s.Tool != "" {
			last[s.Tool] = s.Failed()
		}
	}
	if len(ids) == 0 || len(last) == 0 {
		return nil
	}
	for _, failed := range last {
		if failed {
			return nil
		}
	}
	return ids
}
