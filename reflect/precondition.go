package reflect

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight"
)

// preconditionRule matches the lessons that state a precondition, as the
// rule-based reflector writes them: "Call X before Y", "Call X then Z
// before Y".
var preconditionRule = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^Call ([\w.-]+(?: then [\w.-]+)*) before ([\w.-]+)\b`)
})

// preconditionCounters returns the ids of stored precondition lessons that
// task contradicts: the tools they name were called, and then the tool
// they are about failed with their error anyway. Each such task is a
// counter-example, whether or not the lesson was shown.
func (p *Pipeline) preconditionCounters(ctx context.Context, task *hindsight.Task) ([]string, error) {
	calls := ToolCalls(task)
	tools := map[string]bool{}
	for _, c := range calls {
		if c.Failed() {
			tools[c.Tool] = true
		}
	}
	var out []string
	var list []hindsight.Experience
	for tool := range tools {
		list = list[:0]
		for _, ns := range p.Merger.namespacesOf(task) {
			part, err := p.Merger.Store.List(ctx, hindsight.ListOptions{Namespace: ns, Tool: tool})
			if err != nil {
				return nil, fmt.Errorf("list experiences of %s: %w", tool, err)
			}
			list = append(list, part...)
		}
		for _, e := range list {
			if e.Deleted || e.SupersededBy != "" || e.SourceTask == task.ID {
				continue
			}
			m := preconditionRule().FindStringSubmatch(e.Lesson)
			if m == nil || m[2] != tool {
				continue
			}
			if violated(calls, strings.Split(m[1], " then "), &e) {
				out = append(out, e.ID)
			}
		}
	}
	return out, nil
}

// violated reports whether a call of e's tool failed with e's error after
// every tool of before had succeeded.
func violated(calls []*hindsight.Step, before []string, e *hindsight.Experience) bool {
	done := map[string]bool{}
	for _, c := range calls {
		switch {
		case !c.Failed():
			done[c.Tool] = true
		case c.Tool == e.Tool && allDone(done, before) && (e.ErrorTemplate == "" || templatesAgree(templateOf(c), e.ErrorTemplate)):
			return true
		}
	}
	return false
}

func allDone(done map[string]bool, tools []string) bool {
	for _, t := range tools {
		if !done[t] {
			return false
		}
	}
	return true
}
