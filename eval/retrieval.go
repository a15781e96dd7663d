package eval

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
	"github.com/hindsight-proxy/hindsight/reflect"
)

// Corpus is one labelled corpus of a retrieval set.
type Corpus struct {
	Name   string
	Steps  []hindsight.Step
	Labels map[StepRef]string
	// Queries makes the corpus's unseen failing calls queries of the set;
	// its lessons are in the set's experiences either way.
	Queries bool
}

// RetrievalQuery is one query of a retrieval set. Its JSON names are
// those of the store's retrieval benchmarks (store/testdata/retrieval).
type RetrievalQuery struct {
	ID            string `json:"id"`
	Text          string `json:"text"`
	Server        string `json:"server"`
	Tool          string `json:"tool"`
	ErrorCode     string `json:"error_code"`
	ErrorTemplate string `json:"error_template,omitempty"`
	// Want is the relevant experience with the most evidence; Relevant
	// all of them (a hit is any one of them).
	Want     string   `json:"want"`
	Relevant []string `json:"relevant,omitempty"`
	Lang     string   `json:"lang"`
}

// RetrievalSet builds a retrieval benchmark from labelled corpora, each
// learned from its first half as Run does. The experiences are every
// lesson stored from every corpus, their ids renamed prefix + "exp-NNN"
// in a stable order. The queries are the unseen failing calls of the
// corpora marked Queries whose tool and error class some stored lesson of
// their corpus was learned from, asked as the sidecar asks when it
// appends lessons to an error result: the tool and the error's text, the
// error's template, server, tool and error code; those lessons are the
// relevant ones.
func RetrievalSet(ctx context.Context, corpora []Corpus, prefix string) ([]hindsight.Experience, []RetrievalQuery, error) {
	var exps []hindsight.Experience
	var qs []RetrievalQuery
	for _, c := range corpora {
		tasks := Tasks(c.Steps)
		if len(tasks) < 2 {
			return nil, nil, fmt.Errorf("retrieval set: %s has %d tasks; need at least 2", c.Name, len(tasks))
		}
		learn, unseen := split(tasks, 0)
		live, err := learnedLessons(ctx, tasks, learn)
		if err != nil {
			return nil, nil, err
		}
		sort.Slice(live, func(i, j int) bool {
			a, b := live[i], live[j]
			if a.EvidenceCount != b.EvidenceCount {
				return a.EvidenceCount > b.EvidenceCount
			}
			return a.Tool+"\x00"+a.Lesson+"\x00"+a.ErrorTemplate < b.Tool+"\x00"+b.Lesson+"\x00"+b.ErrorTemplate
		})
		byTask := map[string]*hindsight.Task{}
		for _, t := range tasks {
			byTask[t.ID] = t
		}
		classOf := func(task string, s *hindsight.Step) string { return c.Labels[StepRef{task, s.StepIndex}] }
		about := map[string][]string{} // tool + class → new ids, most evidence first
		for i := range live {
			e := &live[i]
			e.ID = fmt.Sprintf("%sexp-%03d", prefix, len(exps))
			e.SupersededBy, e.Vector, e.Embedder, e.Version = "", nil, "", 0
			if class := sourceClass(e, byTask, classOf); class != "" {
				about[e.Tool+"\x00"+class] = append(about[e.Tool+"\x00"+class], e.ID)
			}
			exps = append(exps, *e)
		}
		if !c.Queries {
			continue
		}
		for _, t := range unseen {
			for _, s := range reflect.ToolCalls(t) {
				rel := about[s.Tool+"\x00"+classOf(t.ID, s)]
				if !s.Failed() || len(s.Result) == 0 || classOf(t.ID, s) == "" || len(rel) == 0 {
					continue
				}
				text := reflect.ErrorText(s)
				qs = append(qs, RetrievalQuery{
					ID:   fmt.Sprintf("%sq-%03d", prefix, len(qs)),
					Text: strings.TrimSpace(s.Tool + " " + text), ErrorTemplate: errtemplate.Mask(text),
					Server: s.Server, Tool: s.Tool, ErrorCode: s.ErrorCode,
					Want: rel[0], Relevant: rel, Lang: "en",
				})
			}
		}
	}
	return exps, qs, nil
}

// learnedLessons are the experiences that reflecting on learn stores, in
// a fresh store.
func learnedLessons(ctx context.Context, tasks, learn []*hindsight.Task) ([]hindsight.Experience, error) {
	st, cleanup, err := openStore(tasks)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	_, live, err := learnFrom(ctx, st, learn)
	return live, err
}
