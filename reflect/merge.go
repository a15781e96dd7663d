package reflect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
	"github.com/hindsight-proxy/hindsight/store"
)

// DefaultDuplicateThreshold is the cosine similarity from which two
// experiences of the same tool are the same lesson.
const DefaultDuplicateThreshold = store.DefaultDuplicateThreshold

// A Merger folds validated experiences into an ExperienceStore.
//
// A near-duplicate of a stored experience (cosine ≥ Threshold, same tool)
// raises the stored one's evidence count and keeps the better-worded,
// higher-confidence text. A contradiction (same situation, opposite rule)
// backed by newer evidence supersedes the stored one: the old experience
// is kept and linked through superseded_by, never deleted. Every change is
// a Put, which increments the version.
type Merger struct {
	Store hindsight.ExperienceStore
	// Embedder measures similarity; nil uses a bag-of-words cosine.
	Embedder hindsight.Embedder
	// Threshold is the duplicate cosine; 0 means DefaultDuplicateThreshold.
	Threshold float64
	// Namespace of new experiences; "" means hindsight.DefaultNamespace.
	Namespace string
	// Namespaces maps servers to namespaces: an experience about a
	// server listed here is stored (and looked for) in its namespace
	// instead of Namespace, so a team shares one server's lessons while
	// another server's stay private.
	Namespaces map[string]string
	// Machine is recorded as the SourceMachine of the experiences it adds
	// (when the reflector left it empty); reinforcing keeps the first one.
	Machine string
	Metrics *Metrics
	Logger  *slog.Logger
}

// Merge outcomes.
const (
	Added      = "added"      // a new experience
	Reinforced = "reinforced" // a near-duplicate raised a stored one's evidence
	Superseded = "superseded" // a new experience replaced a contradicted one
)

// MergeResult says what happened to one experience.
type MergeResult struct {
	Outcome    string // Added, Reinforced, Superseded, DropStale or DropContested
	ID         string // the experience stored or reinforced
	Superseded string // the id of the experience it superseded
}

// Merge stores each experience of task, comparing it with what the store
// holds for the same tool. taskEnd dates the evidence (the task's end). An
// experience goes to its Namespace, when set (the pipeline sets it from
// the task's steps, see namespaceIn), else to its server's.
func (m *Merger) Merge(ctx context.Context, taskEnd time.Time, exps []hindsight.Experience) ([]MergeResult, error) {
	var out []MergeResult
	for i := range exps {
		var r MergeResult
		var err error
		for try := 0; try < 3; try++ {
			r, err = m.mergeOne(ctx, taskEnd, exps[i])
			if !errors.Is(err, hindsight.ErrConflict) {
				break
			}
		}
		if err != nil {
			return out, fmt.Errorf("merge experience: %w", err)
		}
		if r.Outcome == DropStale || r.Outcome == DropContested {
			m.Metrics.drop(r.Outcome)
		} else {
			m.Metrics.merge(r.Outcome)
		}
		out = append(out, r)
	}
	return out, nil
}

func (m *Merger) namespace() string {
	if m.Namespace != "" {
		return m.Namespace
	}
	return hindsight.DefaultNamespace
}

// namespaceOf is the namespace of experiences about server.
func (m *Merger) namespaceOf(server string) string {
	if ns := m.Namespaces[server]; ns != "" {
		return ns
	}
	return m.namespace()
}

// namespacesOf are the namespaces of task's servers, the default first,
// then the ones their sidecars named (--namespace).
func (m *Merger) namespacesOf(task *hindsight.Task) []string {
	out := []string{m.namespace()}
	for _, s := range task.Servers {
		if ns := m.namespaceOf(s); !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	for i := range task.Steps {
		if ns := task.Steps[i].Namespace; ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// namespaceIn is the namespace of e, learnt from task: the one the sidecar
// that recorded its cited steps named (--namespace), else the one a
// sidecar of its server named in task, else namespaceOf its server.
func (m *Merger) namespaceIn(task *hindsight.Task, e *hindsight.Experience) string {
	server := ""
	for i := range task.Steps {
		s := &task.Steps[i]
		switch {
		case s.Namespace == "":
		case slices.Contains(e.SourceSteps, s.StepIndex) && (e.Server == "" || s.Server == e.Server):
			return s.Namespace
		case s.Server == e.Server && server == "":
			server = s.Namespace
		}
	}
	if server != "" {
		return server
	}
	return m.namespaceOf(e.Server)
}

func (m *Merger) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.Default()
}

func (m *Merger) mergeOne(ctx context.Context, taskEnd time.Time, e hindsight.Experience) (MergeResult, error) {
	if e.Namespace == "" {
		e.Namespace = m.namespaceOf(e.Server)
	}
	if e.SourceMachine == "" {
		e.SourceMachine = m.Machine
	}
	known, err := m.Store.List(ctx, hindsight.ListOptions{Namespace: e.Namespace, Tool: e.Tool})
	if err != nil {
		return MergeResult{}, fmt.Errorf("list experiences: %w", err)
	}
	// Only live experiences of the same tool, and of the same server when
	// both name one, take part: injection reads a server's lessons only,
	// so one reinforced under another server's name would never reach the
	// sidecars of the server it was learnt on (two servers, or one server
	// under two names, can share a namespace and tool names).
	live := known[:0]
	for _, k := range known {
		if !k.Deleted && k.SupersededBy == "" && k.Tool == e.Tool && (e.Server == "" || k.Server == "" || k.Server == e.Server) {
			live = append(live, k)
		}
	}
	vecs, err := m.vectors(ctx, &e, live)
	if err != nil {
		return MergeResult{}, err
	}
	threshold := m.Threshold
	if threshold == 0 {
		threshold = DefaultDuplicateThreshold
	}
	var dup, contra *hindsight.Experience
	bestDup, bestContra := threshold, threshold
	for i := range live {
		k := &live[i]
		if sameLesson(&e, k) {
			dup, bestDup = k, 2 // the same fix for the same error: above any cosine
			continue
		}
		if e.ErrorTemplate != "" && k.ErrorTemplate != "" && !templatesAgree(e.ErrorTemplate, k.ErrorTemplate) {
			continue // about another error: neither the same lesson nor its opposite
		}
		full, sit := store.Cosine(vecs[0], vecs[2+2*i]), store.Cosine(vecs[1], vecs[3+2*i])
		if sit >= bestContra && contradicts(e.Lesson, k.Lesson) {
			contra, bestContra = k, sit
			continue
		}
		if full >= bestDup {
			dup, bestDup = k, full
		}
	}
	switch {
	case contra != nil:
		return m.supersede(ctx, taskEnd, &e, contra)
	case dup != nil:
		return m.reinforce(ctx, &e, dup)
	}
	e.ID = experienceID(&e)
	e.EvidenceCount = 1
	e.EvidenceTasks = []string{e.SourceTask}
	e.Version = 0
	if err := m.Store.Put(ctx, &e); err != nil {
		return MergeResult{}, fmt.Errorf("put experience: %w", err)
	}
	// Another daemon sharing the store may have added the same lesson
	// meanwhile (see dedupe.go).
	kept, err := m.dedupe(ctx, &e)
	if err != nil {
		m.logger().Warn("reflect: look for copies of a lesson added", "id", e.ID, "err", err)
	}
	if kept != e.ID {
		return MergeResult{Outcome: Reinforced, ID: kept}, nil
	}
	return MergeResult{Outcome: Added, ID: e.ID}, nil
}

// sameLesson reports whether e and k give the same fix for the same error
// of the same tool: their templates agree (a wildcard matches anything)
// and their lessons read the same once the templates are taken out.
func sameLesson(e, k *hindsight.Experience) bool {
	if e.Tool != k.Tool || e.ErrorTemplate == "" || k.ErrorTemplate == "" || !templatesAgree(e.ErrorTemplate, k.ErrorTemplate) {
		return false
	}
	return lessonKey(e.Lesson) == lessonKey(k.Lesson)
}

// lessonKey is a lesson without its quoted template and the shapes it
// warns against ("…, not MM/DD/YYYY"), folded.
func lessonKey(s string) string {
	s = backquoted().ReplaceAllString(s, "`…`")
	s = notShape().ReplaceAllString(s, "")
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

var (
	backquoted = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("`[^`]*`") })
	notShape   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`, not [^;.]*`) })
)

// templatesAgree reports whether two error templates describe the same
// error: as many tokens, each pair equal or one of them a wildcard.
func templatesAgree(a, b string) bool {
	ta, tb := errtemplate.Tokens(a), errtemplate.Tokens(b)
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i] != tb[i] && ta[i] != errtemplate.Wildcard && tb[i] != errtemplate.Wildcard {
			return false
		}
	}
	return true
}

// retemplate replaces, in text, the back-quoted templates that agree with
// tpl by tpl, so a lesson quotes its experience's most general template.
func retemplate(text, tpl string) string {
	if tpl == "" {
		return text
	}
	return backquoted().ReplaceAllStringFunc(text, func(q string) string {
		if inner := q[1 : len(q)-1]; inner != tpl && templatesAgree(inner, tpl) {
			return "`" + tpl + "`"
		}
		return q
	})
}

// general returns the more general of two agreeing templates: the one
// with more wildcards.
func general(a, b string) string {
	if strings.Count(b, errtemplate.Wildcard) > strings.Count(a, errtemplate.Wildcard) {
		return b
	}
	return a
}

// reinforce counts e as more evidence for the stored old.
func (m *Merger) reinforce(ctx context.Context, e, old *hindsight.Experience) (MergeResult, error) {
	// The same task seen twice (a retried reflection, or two candidates of
	// one task) is not new evidence.
	changed := false
	bonus := e.Confidence >= unambiguousPrior-1e-9 || hadBonus(old.Confidence, max(old.EvidenceCount, 1), old.CounterCount)
	tasks := old.EvidenceTasks
	if len(tasks) == 0 {
		tasks = []string{old.SourceTask}
	}
	newTask := !slices.Contains(tasks, e.SourceTask)
	if newTask {
		// An imported lesson has no local evidence yet: this task is its
		// first. Anything else stored counts its own task at least.
		if old.EvidenceCount > 0 || !strings.HasPrefix(old.Origin, "import") {
			old.EvidenceCount = max(old.EvidenceCount, 1)
		}
		old.EvidenceCount++
		old.EvidenceTasks = append(tasks, e.SourceTask)
		if n := len(old.EvidenceTasks); n > hindsight.MaxEvidenceTasks {
			old.EvidenceTasks = old.EvidenceTasks[n-hindsight.MaxEvidenceTasks:]
		}
		changed = true
	}
	if e.ErrorTemplate != "" && (old.ErrorTemplate == "" || templatesAgree(e.ErrorTemplate, old.ErrorTemplate)) {
		if t := general(old.ErrorTemplate, e.ErrorTemplate); t != old.ErrorTemplate {
			old.ErrorTemplate, changed = t, true
		}
	}
	if better(e, old) && e.Lesson != old.Lesson {
		changed = true
		old.Situation, old.Action, old.Result, old.Lesson = e.Situation, e.Action, e.Result, e.Lesson
		old.SourceTask, old.SourceSteps = e.SourceTask, e.SourceSteps
		if e.ErrorCode != "" {
			old.ErrorCode = e.ErrorCode
		}
		if e.TaskType != "" {
			old.TaskType = e.TaskType
		}
		// The store embeds the new text.
		old.Vector, old.Embedder = nil, ""
	}
	if l := retemplate(old.Lesson, old.ErrorTemplate); l != old.Lesson {
		old.Lesson, old.Situation = l, retemplate(old.Situation, old.ErrorTemplate)
		old.Vector, old.Embedder, changed = nil, "", true
	}
	if c := Confidence(old.EvidenceCount, old.CounterCount, bonus); newTask && c != old.Confidence && old.Origin != "manual" {
		old.Confidence, changed = c, true
	}
	if !changed {
		return MergeResult{Outcome: Reinforced, ID: old.ID}, nil
	}
	if err := m.Store.Put(ctx, old); err != nil {
		return MergeResult{}, fmt.Errorf("put reinforced experience: %w", err)
	}
	m.logger().Debug("reflect: experience reinforced", "id", old.ID, "evidence", old.EvidenceCount)
	return MergeResult{Outcome: Reinforced, ID: old.ID}, nil
}

// supersede stores e in place of old when e rests on newer evidence.
func (m *Merger) supersede(ctx context.Context, taskEnd time.Time, e, old *hindsight.Experience) (MergeResult, error) {
	if !taskEnd.IsZero() && !old.UpdatedAt.IsZero() && taskEnd.Before(old.UpdatedAt) && old.SourceTask != e.SourceTask {
		m.logger().Info("reflect: candidate contradicts a newer experience; dropped", "old", old.ID, "lesson", Truncate(e.Lesson, 120))
		return MergeResult{Outcome: DropStale, ID: old.ID}, nil
	}
	if old.EvidenceCount > 1 && old.Origin != "manual" {
		// One task does not overturn a lesson several confirmed: the
		// candidate may be wrong, or planted. If the old lesson fails,
		// counter-evidence lowers it until a contradiction can win.
		m.logger().Info("reflect: candidate contradicts a lesson with more evidence; dropped", "old", old.ID, "evidence", old.EvidenceCount, "lesson", Truncate(e.Lesson, 120))
		return MergeResult{Outcome: DropContested, ID: old.ID}, nil
	}
	e.ID = experienceID(e)
	e.EvidenceCount = 1
	e.EvidenceTasks = []string{e.SourceTask}
	e.Version = 0
	if err := m.Store.Put(ctx, e); err != nil {
		return MergeResult{}, fmt.Errorf("put superseding experience: %w", err)
	}
	old.SupersededBy = e.ID
	if err := m.Store.Put(ctx, old); err != nil {
		return MergeResult{}, fmt.Errorf("put superseded experience: %w", err)
	}
	m.logger().Info("reflect: experience superseded", "old", old.ID, "new", e.ID)
	return MergeResult{Outcome: Superseded, ID: e.ID, Superseded: old.ID}, nil
}

// vectors returns, for e and then each of live, the vector of its text
// and of its situation alone. Stored vectors of the same embedder are
// reused.
func (m *Merger) vectors(ctx context.Context, e *hindsight.Experience, live []hindsight.Experience) ([][]float32, error) {
	texts := []string{store.Text(e), e.Situation}
	for i := range live {
		texts = append(texts, store.Text(&live[i]), live[i].Situation)
	}
	if m.Embedder == nil {
		out := make([][]float32, len(texts))
		for i, t := range texts {
			out[i] = bagOfWords(t)
		}
		return out, nil
	}
	id := store.EmbedderID(m.Embedder)
	out := make([][]float32, len(texts))
	var todo []string
	var at []int
	for i, t := range texts {
		if k := i/2 - 1; i%2 == 0 && k >= 0 && live[k].Embedder == id && len(live[k].Vector) == m.Embedder.Dim() {
			out[i] = live[k].Vector
			continue
		}
		todo = append(todo, t)
		at = append(at, i)
	}
	vecs, err := m.Embedder.Embed(ctx, todo)
	if err != nil {
		return nil, fmt.Errorf("embed experiences: %w", err)
	}
	if len(vecs) != len(todo) {
		return nil, fmt.Errorf("embed experiences: %d vectors for %d texts", len(vecs), len(todo))
	}
	for j, i := range at {
		out[i] = vecs[j]
	}
	return out, nil
}

// experienceID derives a stable id from what the experience says and where
// it came from, so a retried reflection does not store it twice.
func experienceID(e *hindsight.Experience) string {
	h := sha256.Sum256([]byte(e.Namespace + "\x00" + e.Tool + "\x00" + e.SourceTask + "\x00" + e.Lesson))
	return "exp_" + hex.EncodeToString(h[:10])
}

// better reports whether e's text should replace old's: more confident, or
// as confident and more specific.
func better(e, old *hindsight.Experience) bool {
	if math.Abs(e.Confidence-old.Confidence) > 0.05 {
		return e.Confidence > old.Confidence
	}
	return wording(e.Lesson) > wording(old.Lesson)
}

// wording scores a lesson's text: concrete tokens count, rambling does not.
func wording(s string) float64 {
	words := len(strings.Fields(s))
	score := float64(len(codeLike().FindAllString(s, -1)))
	score += math.Min(float64(words), 25) / 25
	if words > 60 {
		score -= float64(words-60) / 20
	}
	if genericAdvice().MatchString(s) {
		score--
	}
	return score
}

var (
	negation = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(do not|don't|never|avoid|must not|should not|shouldn't|stop|no longer|instead of)\b`)
	})
	quoted = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("\"[^\"]*\"|`[^`]*`") })
	stop   = map[string]bool{"the": true, "a": true, "an": true, "to": true, "of": true, "with": true, "and": true, "or": true, "for": true, "it": true, "is": true, "in": true, "on": true, "before": true, "after": true, "when": true, "calling": true, "call": true}
)

// contradicts reports whether the newer lesson about a situation gives the
// opposite rule of the older: one forbids what the other prescribes, or the
// newer rejects the value the older prescribed.
func contradicts(newer, older string) bool {
	na, nb := negation().MatchString(newer), negation().MatchString(older)
	if na != nb {
		ta, tb := contentWords(negation().ReplaceAllString(newer, " ")), contentWords(negation().ReplaceAllString(older, " "))
		return jaccard(ta, tb) >= 0.6
	}
	// The newer rule forbids the value the older one prescribed: "set path
	// to "/b", not "/a"" against "set path to "/a"".
	qa, qb := quoted().FindAllString(newer, -1), quoted().FindAllString(older, -1)
	if len(qa) < 2 || len(qb) == 0 || strings.EqualFold(qa[0], qb[0]) {
		return false
	}
	for _, q := range qa[1:] {
		if strings.EqualFold(q, qb[0]) {
			return true
		}
	}
	return false
}

func contentWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range wordRe().FindAllString(strings.ToLower(s), -1) {
		w = strings.Trim(w, "./-")
		if w != "" && !stop[w] {
			out[w] = true
		}
	}
	return out
}

func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	inter := 0
	for w := range a {
		if b[w] {
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// bagOfWords is the fallback embedding: word counts hashed into 256
// dimensions. It is enough to spot rewordings of the same lesson.
func bagOfWords(s string) []float32 {
	v := make([]float32, 256)
	for _, w := range wordRe().FindAllString(strings.ToLower(s), -1) {
		h := sha256.Sum256([]byte(strings.Trim(w, "./-")))
		v[int(h[0])]++
	}
	return v
}
