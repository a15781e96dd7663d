// Package eval measures what Hindsight's learning loop would tell tasks it
// has not seen. It splits recorded tasks in two by start time, reflects on
// the first half with the rule-based reflector into a fresh embedded store,
// then replays every failing tool call of the second half through the real
// injection path (inject.Injector.ToolResult) and checks each line it
// appends against the truth: is the lesson about that call's error?
//
// The truth is a labels file beside the traces (labels.jsonl: the error
// class of each failed step, as the corpus in testdata/corpus has), or,
// without one, the error templates that a miner learns from every failed
// call of both halves. A lesson is about a call's error when the failure it
// was learned from has the same tool and class as the call.
//
// It also counts the stored lessons that quote a value of exactly one task
// (an id, an amount, a date, a name): such a lesson cannot help another
// task; the candidates validation refused as vacuous (advice that only
// restates the error) and the stored lessons the same check would refuse;
// the lessons at or above the injection gate; and the tokens that the
// helped failures and their retries cost, as a share of all the tool
// tokens of the unseen half. Everything runs in a temporary directory and
// is deterministic.
package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/reflect"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// Options tune a run. The zero value learns from the first half.
type Options struct {
	// Learn is the share of tasks, by start time, that reflection learns
	// from; 0 means 0.5.
	Learn float64
	// NoSeenOnce replays without inject.Injector.SeenOnce. By default a
	// run replays with it (lessons seen in one task reach the errors their
	// templates fit exactly), which sidecars do not enable yet.
	NoSeenOnce bool
}

// Report is what a run found. Its JSON names are part of `hindsight eval
// --json`.
type Report struct {
	Tasks          int `json:"tasks"`
	LearnTasks     int `json:"learn_tasks"`
	UnseenTasks    int `json:"unseen_tasks"`
	LessonsStored  int `json:"lessons_stored"`
	LessonsOneOff  int `json:"lessons_with_one_off_values"`
	UnseenFailures int `json:"unseen_failing_calls"`
	// KnownFailures are the unseen failing calls whose tool failed with
	// the same error class in the learning half.
	KnownFailures int `json:"known_failing_calls"`
	// LinesAppended counts lesson lines appended to unseen failing calls;
	// RelevantLines those about the call's error.
	LinesAppended int     `json:"lines_appended"`
	RelevantLines int     `json:"relevant_lines"`
	Precision     float64 `json:"precision"`
	// KnownHelped are the known failing calls that got at least one
	// relevant line; Recall is KnownHelped / KnownFailures.
	KnownHelped int     `json:"known_calls_helped"`
	Recall      float64 `json:"recall"`
	// Truth says where "about the call's error" comes from: "labels" or
	// "templates".
	Truth string `json:"truth"`
	// OneOffExamples shows up to five leaking lessons.
	OneOffExamples []string `json:"one_off_examples,omitempty"`
	// Irrelevant shows up to five appended lines that were not about
	// their call's error.
	Irrelevant []string `json:"irrelevant_examples,omitempty"`
	// Missed shows up to five known failing calls that got no relevant
	// line: tool, error class and error text.
	Missed []string `json:"missed_examples,omitempty"`
	// RPCErrors counts the unseen failing calls answered with a JSON-RPC
	// error: there is no result to append a line to, so they are left out
	// of UnseenFailures, KnownFailures and the recall.
	RPCErrors int `json:"rpc_error_calls"`
	// LessonsAboveGate are the stored lessons whose confidence reaches
	// the injection gate (inject.DefaultMinConfidence).
	LessonsAboveGate int `json:"lessons_above_gate"`
	// VacuousRefused counts the candidates validation refused because
	// their advice says nothing their error does not; Vacuous shows up to
	// five, with the reason.
	VacuousRefused int      `json:"vacuous_refused"`
	Vacuous        []string `json:"vacuous_examples,omitempty"`
	// VacuousStored counts the stored lessons the same check calls vacuous
	// (0 unless a lesson escaped it).
	VacuousStored int `json:"vacuous_stored"`
	// ToolTokens are the tokens (cl100k_base) of the arguments and results
	// of every tool call of the unseen half; HelpedTokens those of the
	// failing calls that got a relevant line and of the calls of the same
	// tool that followed them until one succeeded (their retries).
	// TokenShare is HelpedTokens / ToolTokens.
	ToolTokens   int     `json:"tool_tokens"`
	HelpedTokens int     `json:"helped_tokens"`
	TokenShare   float64 `json:"helped_token_share"`
	// Lessons are the experiences stored, best evidence first.
	Lessons []Lesson `json:"lessons"`
}

// Lesson is one stored experience as the report shows it.
type Lesson struct {
	Tool          string  `json:"tool"`
	Lesson        string  `json:"lesson"`
	Confidence    float64 `json:"confidence"`
	EvidenceCount int     `json:"evidence_count"`
	CounterCount  int     `json:"counter_count"`
}

// StepRef names one step of one task.
type StepRef struct {
	Task  string
	Index int
}

// Run evaluates steps (any order; grouped by task id) with labels (the
// error class of failed steps; nil: learned templates are the truth).
func Run(ctx context.Context, steps []hindsight.Step, labels map[StepRef]string, opt Options) (*Report, error) {
	tasks := Tasks(steps)
	if len(tasks) < 2 {
		return nil, fmt.Errorf("evaluate: %d tasks; need at least 2", len(tasks))
	}
	learn, unseen := split(tasks, opt.Learn)
	rep := &Report{Tasks: len(tasks), LearnTasks: len(learn), UnseenTasks: len(unseen), Truth: "labels"}
	classOf := func(task string, s *hindsight.Step) string { return labels[StepRef{task, s.StepIndex}] }
	if labels == nil {
		rep.Truth = "templates"
		classOf = oracle(tasks)
	}

	st, cleanup, err := openStore(tasks)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	drops, live, err := learnFrom(ctx, st, learn)
	if err != nil {
		return nil, err
	}
	for _, d := range drops {
		if d.Reason == reflect.DropVacuous {
			rep.VacuousRefused++
			if len(rep.Vacuous) < 5 {
				rep.Vacuous = append(rep.Vacuous, fmt.Sprintf("%s: %s — %s", d.Experience.Tool, d.Experience.Lesson, d.Detail))
			}
		}
	}
	byID := map[string]*hindsight.Experience{}
	for i := range live {
		byID[live[i].ID] = &live[i]
	}
	rep.LessonsStored = len(live)
	for _, e := range live {
		if e.Confidence >= inject.DefaultMinConfidence {
			rep.LessonsAboveGate++
		}
		if reflect.Vacuous(&e) {
			rep.VacuousStored++
		}
		rep.Lessons = append(rep.Lessons, Lesson{e.Tool, e.Lesson, e.Confidence, e.EvidenceCount, e.CounterCount})
	}
	sort.SliceStable(rep.Lessons, func(i, j int) bool {
		a, b := rep.Lessons[i], rep.Lessons[j]
		if a.EvidenceCount != b.EvidenceCount {
			return a.EvidenceCount > b.EvidenceCount
		}
		return a.Tool+a.Lesson < b.Tool+b.Lesson
	})
	leaks := oneOffLessons(tasks, live)
	rep.LessonsOneOff = len(leaks)
	rep.OneOffExamples = leaks[:min(5, len(leaks))]

	known := map[string]bool{} // tool + class seen failing while learning
	byTask := map[string]*hindsight.Task{}
	for _, t := range tasks {
		byTask[t.ID] = t
	}
	for _, t := range learn {
		for _, s := range reflect.ToolCalls(t) {
			if s.Failed() {
				known[s.Tool+"\x00"+classOf(t.ID, s)] = true
			}
		}
	}
	in := &inject.Injector{Source: st, SeenOnce: !opt.NoSeenOnce}
	tok, err := newTokens()
	if err != nil {
		return nil, err
	}
	for _, t := range unseen {
		sess := &proxy.Session{ID: t.ID, Server: serverOf(t)}
		calls := reflect.ToolCalls(t)
		counted := map[*hindsight.Step]bool{}
		for _, s := range calls {
			rep.ToolTokens += tok.step(s)
		}
		for i, s := range calls {
			if !s.Failed() {
				continue
			}
			if len(s.Result) == 0 {
				rep.RPCErrors++
				continue
			}
			rep.UnseenFailures++
			class := classOf(t.ID, s)
			isKnown := class != "" && known[s.Tool+"\x00"+class]
			if isKnown {
				rep.KnownFailures++
			}
			sess.Server = s.Server
			ex := &proxy.Exchange{Session: sess, Method: "tools/call", Direction: hindsight.ClientToServer, Request: request(s)}
			in.ToolResult(ctx, ex, s.Result)
			helped := false
			for _, inj := range ex.Injected {
				for _, id := range inj.ExperienceIDs {
					rep.LinesAppended++
					e := byID[id]
					if e != nil && e.Tool == s.Tool && class != "" && sourceClass(e, byTask, classOf) == class {
						rep.RelevantLines++
						helped = true
					} else if len(rep.Irrelevant) < 5 && e != nil {
						rep.Irrelevant = append(rep.Irrelevant, fmt.Sprintf("%s (%s) got %q", s.Tool, class, e.Lesson))
					}
				}
			}
			if helped && isKnown {
				rep.KnownHelped++
			} else if isKnown && len(rep.Missed) < missedShown {
				rep.Missed = append(rep.Missed, fmt.Sprintf("%s (%s): %s", s.Tool, class, reflect.Truncate(reflect.ErrorText(s), 160)))
			}
			if helped {
				rep.HelpedTokens += tok.failure(calls, i, counted)
			}
		}
	}
	if rep.LinesAppended > 0 {
		rep.Precision = float64(rep.RelevantLines) / float64(rep.LinesAppended)
	}
	if rep.KnownFailures > 0 {
		rep.Recall = float64(rep.KnownHelped) / float64(rep.KnownFailures)
	}
	if rep.ToolTokens > 0 {
		rep.TokenShare = float64(rep.HelpedTokens) / float64(rep.ToolTokens)
	}
	return rep, nil
}

// missedShown is how many missed known failures a report shows.
var missedShown = 5

// split cuts tasks (in start order) into the share that learns (0 or
// out of (0, 1): half) and the unseen rest, each at least one task.
func split(tasks []*hindsight.Task, share float64) (learn, unseen []*hindsight.Task) {
	if share <= 0 || share >= 1 {
		share = 0.5
	}
	n := max(1, min(len(tasks)-1, int(float64(len(tasks))*share+0.5)))
	return tasks[:n], tasks[n:]
}

// openStore opens a fresh embedded store in a temporary directory, its
// clock at the last end of tasks; cleanup closes and removes it.
func openStore(tasks []*hindsight.Task) (*embedded.Store, func(), error) {
	dir, err := os.MkdirTemp("", "hindsight-eval-*")
	if err != nil {
		return nil, nil, fmt.Errorf("evaluate: %w", err)
	}
	now := lastTime(tasks)
	st, err := embedded.Open(dir, embedder.NewLocal(0), embedded.Options{Now: func() time.Time { return now }})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("evaluate: %w", err)
	}
	return st, func() { st.Close(); os.RemoveAll(dir) }, nil
}

// learnFrom reflects on tasks in order, as the daemon's queue would, and
// returns the candidates validation refused and the experiences stored.
func learnFrom(ctx context.Context, st hindsight.ExperienceStore, tasks []*hindsight.Task) ([]reflect.Drop, []hindsight.Experience, error) {
	tpl, err := reflect.NewTemplates(nil)
	if err != nil {
		return nil, nil, err
	}
	p := &reflect.Pipeline{
		Reflector: reflect.Rules{},
		Validator: &reflect.Validator{},
		Merger:    &reflect.Merger{Store: st},
		Templates: tpl,
		Logger:    quiet,
		Harmed:    inject.Harmed,
	}
	p.Validator.Logger, p.Merger.Logger = quiet, quiet
	var drops []reflect.Drop
	for _, t := range tasks {
		out, err := p.Process(ctx, t)
		if err != nil {
			return nil, nil, fmt.Errorf("evaluate: %w", err)
		}
		drops = append(drops, out.Dropped...)
		if err := p.Credit(ctx, t); err != nil {
			return nil, nil, fmt.Errorf("evaluate: %w", err)
		}
	}
	live, err := st.List(ctx, hindsight.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("evaluate: list lessons: %w", err)
	}
	return drops, live, nil
}

// sourceClass is the class of the failure an experience was learned from:
// among the failed steps of its tool in its source steps, the one its
// error template fits best (errtemplate.Similarity), the first on a tie.
func sourceClass(e *hindsight.Experience, tasks map[string]*hindsight.Task, classOf func(string, *hindsight.Step) string) string {
	t := tasks[e.SourceTask]
	if t == nil {
		return ""
	}
	var best *hindsight.Step
	bestFit := -1.0
	for i := range t.Steps {
		s := &t.Steps[i]
		if s.Tool != e.Tool || !s.Failed() || !slices.Contains(e.SourceSteps, s.StepIndex) {
			continue
		}
		fit := 0.0
		if e.ErrorTemplate != "" {
			fit = errtemplate.Similarity(e.ErrorTemplate, reflect.ErrorText(s))
		}
		if fit > bestFit {
			best, bestFit = s, fit
		}
	}
	if best == nil {
		return ""
	}
	return classOf(t.ID, best)
}

// oracle returns the error class of failed steps as the template clusters
// a miner learns from all of tasks' failures.
func oracle(tasks []*hindsight.Task) func(string, *hindsight.Step) string {
	m := errtemplate.NewMiner(errtemplate.Options{})
	for _, t := range tasks {
		for _, s := range reflect.ToolCalls(t) {
			if s.Failed() {
				m.Add(s.Server+"\x00"+s.Tool, reflect.ErrorText(s))
			}
		}
	}
	return func(_ string, s *hindsight.Step) string {
		c, ok := m.Match(s.Server+"\x00"+s.Tool, reflect.ErrorText(s))
		if !ok {
			return ""
		}
		return c.ID
	}
}

// Tasks groups steps into tasks, steps by index, tasks by their first
// step's start (then id).
func Tasks(steps []hindsight.Step) []*hindsight.Task {
	by := map[string]*hindsight.Task{}
	var out []*hindsight.Task
	for _, s := range steps {
		t := by[s.TaskID]
		if t == nil {
			t = &hindsight.Task{ID: s.TaskID, Final: true}
			by[s.TaskID] = t
			out = append(out, t)
		}
		t.Steps = append(t.Steps, s)
	}
	for _, t := range out {
		sort.SliceStable(t.Steps, func(i, j int) bool { return t.Steps[i].StepIndex < t.Steps[j].StepIndex })
		t.StepCount = len(t.Steps)
		t.StartedAt, t.EndedAt = t.Steps[0].StartedAt, t.Steps[len(t.Steps)-1].EndedAt
		servers := map[string]bool{}
		for _, s := range t.Steps {
			if s.Failed() && s.Method == "tools/call" {
				t.FailureCount++
			}
			if s.Server != "" && !servers[s.Server] {
				servers[s.Server] = true
				t.Servers = append(t.Servers, s.Server)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func lastTime(tasks []*hindsight.Task) time.Time {
	var t time.Time
	for _, x := range tasks {
		if x.EndedAt.After(t) {
			t = x.EndedAt
		}
	}
	if t.IsZero() {
		t = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

func serverOf(t *hindsight.Task) string {
	if len(t.Servers) > 0 {
		return t.Servers[0]
	}
	return ""
}

// request rebuilds the tools/call request of s as the injector reads it.
func request(s *hindsight.Step) []byte {
	if len(s.Request) > 0 {
		return s.Request
	}
	args := s.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.StepIndex, "method": "tools/call",
		"params": map[string]any{"name": s.Tool, "arguments": args}})
	return b
}

// quiet drops the pipeline's log lines: a run reports, it does not log.
var quiet = slog.New(slog.DiscardHandler)
