package eval

import (
	"fmt"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/reflect"
)

// oneOffLessons returns the lessons (as "tool: lesson — quotes X") whose
// texts quote a value that occurs in exactly one task's arguments or
// results.
func oneOffLessons(tasks []*hindsight.Task, exps []hindsight.Experience) []string {
	count := map[string]int{}
	for _, t := range tasks {
		for v := range reflect.TaskValues(t) {
			count[v]++
		}
	}
	var out []string
	for _, e := range exps {
		for _, f := range []string{e.Lesson, e.Situation, e.Action, e.Result, e.ErrorTemplate} {
			if lit := firstOneOff(f, count); lit != "" {
				out = append(out, fmt.Sprintf("%s: %s — quotes %q", e.Tool, e.Lesson, lit))
				break
			}
		}
	}
	return out
}

func firstOneOff(text string, count map[string]int) string {
	for _, lit := range reflect.Literals(text) {
		if count[lit] == 1 {
			return lit
		}
	}
	return ""
}
