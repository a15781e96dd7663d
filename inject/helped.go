package inject

import (
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
	"github.com/tidwall/gjson"
)

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

// Harmed returns the ids of the experiences appended to an error result in
// task after which the next call of the same tool failed with the same
// error anyway (the same error template): counter-evidence that
// reflection counts against them, lowering their confidence.
func Harmed(task *hindsight.Task) []string {
	if task == nil {
		return nil
	}
	var ids []string
	seen := map[string]bool{}
	for i := range task.Steps {
		s := &task.Steps[i]
		var shown []string
		for _, inj := range s.Injected {
			if inj.Channel == ChannelErrorResult {
				shown = append(shown, inj.ExperienceIDs...)
			}
		}
		if len(shown) == 0 {
			continue
		}
		next := nextCall(task, i)
		if next == nil || !next.Failed() || !sameFailure(s, next) {
			continue
		}
		for _, id := range shown {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// nextCall is the first call of the tool of task.Steps[i] after it.
func nextCall(task *hindsight.Task, i int) *hindsight.Step {
	tool := task.Steps[i].Tool
	for j := i + 1; j < len(task.Steps); j++ {
		s := &task.Steps[j]
		if s.Method == "tools/call" && !s.Local && s.Tool == tool {
			return s
		}
	}
	return nil
}

// sameFailure reports whether two failed steps failed with the same error:
// their templates (or masked error texts) are equal.
func sameFailure(a, b *hindsight.Step) bool {
	ta, tb := a.ErrorTemplate, b.ErrorTemplate
	if ta == "" || tb == "" {
		ta, tb = errtemplate.Mask(stepErrorText(a)), errtemplate.Mask(stepErrorText(b))
	}
	return ta == tb
}

// stepErrorText is the error message of a failed step.
func stepErrorText(s *hindsight.Step) string {
	if s.Error != nil && s.Error.Message != "" {
		return s.Error.Message
	}
	// The server's own text is the first item; Hindsight's lines, when
	// it added any, come last.
	return gjson.GetBytes(s.Result, "content.0.text").String()
}
