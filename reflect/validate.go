package reflect

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight"
)

// DefaultMinConfidence is the confidence a model must state for its
// candidate to be kept (rule candidates carry their evidence prior
// instead). What is stored is the evidence prior, not the stated value.
const DefaultMinConfidence = 0.6

// A Validator checks experience candidates against the task they came from
// and drops what the trace does not support. It fills what the trace tells
// for sure (source task, server, missing tool and error code) and removes
// secrets a model may have echoed back.
type Validator struct {
	// MinConfidence drops candidates below it; 0 means DefaultMinConfidence.
	MinConfidence float64
	// Redactor re-checks every text field for secrets; nil skips it.
	Redactor Redactor
	// Metrics counts drops by reason; nil counts nothing.
	Metrics *Metrics
	// Logger receives one debug line per drop; nil uses slog.Default().
	Logger *slog.Logger
}

// Drop is a candidate the Validator refused, with the reason.
type Drop struct {
	Reason     string
	Detail     string
	Experience hindsight.Experience
	// Lesson and SafeDetail are the candidate's lesson and the detail as
	// they may be shown or kept: redacted (their length only without a
	// Redactor), the lesson cut to 200 bytes.
	Lesson, SafeDetail string
}

// Validate returns the candidates that pass, completed from the task, and
// the ones dropped, each with its reason.
func (v *Validator) Validate(task *hindsight.Task, cands []hindsight.Experience) (kept []hindsight.Experience, drops []Drop) {
	steps := make(map[int]*hindsight.Step, len(task.Steps))
	for i := range task.Steps {
		steps[task.Steps[i].StepIndex] = &task.Steps[i]
	}
	vocab := newVocabulary(task)
	vals := newTaskValues(task)
	for _, c := range cands {
		reason, detail := v.check(&c, task, steps, vocab, vals)
		if reason != "" {
			v.Metrics.drop(reason)
			v.logger().Debug("reflect: candidate dropped", "task", task.ID, "reason", reason, "detail", detail, "lesson", v.scrub(Truncate(c.Lesson, 120)))
			drops = append(drops, Drop{Reason: reason, Detail: detail, Experience: c,
				Lesson: v.scrub(Truncate(c.Lesson, 200)), SafeDetail: v.scrub(detail)})
			continue
		}
		kept = append(kept, c)
	}
	return kept, drops
}

// scrub redacts text bound for a log line.
func (v *Validator) scrub(s string) string {
	if v.Redactor == nil {
		return "(" + fmt.Sprint(len(s)) + " bytes)"
	}
	s, _ = v.Redactor.Redact(s)
	return s
}

func (v *Validator) logger() *slog.Logger {
	if v.Logger != nil {
		return v.Logger
	}
	return slog.Default()
}

// check validates c in place and returns the reason to drop it, or "".
func (v *Validator) check(c *hindsight.Experience, task *hindsight.Task, steps map[int]*hindsight.Step, vocab *vocabulary, vals *taskValues) (reason, detail string) {
	c.Situation = strings.TrimSpace(c.Situation)
	c.Lesson = strings.TrimSpace(c.Lesson)
	if c.Lesson == "" || c.Situation == "" {
		return DropIncomplete, "lesson or situation missing"
	}
	if len(c.SourceSteps) == 0 {
		return DropNoSteps, "no source steps"
	}
	slices.Sort(c.SourceSteps)
	c.SourceSteps = slices.Compact(c.SourceSteps)
	var cited []*hindsight.Step
	for _, i := range c.SourceSteps {
		s, ok := steps[i]
		if !ok {
			return DropInventedStep, fmt.Sprintf("step %d not in task (%d steps)", i, len(task.Steps))
		}
		cited = append(cited, s)
	}
	if c.Tool != "" && !slices.ContainsFunc(cited, func(s *hindsight.Step) bool { return s.Tool == c.Tool }) {
		return DropToolMismatch, fmt.Sprintf("tool %q not called in cited steps", c.Tool)
	}
	if c.Origin != "rules" {
		// A model states its confidence; a claim below the threshold is
		// not worth keeping. What is stored follows the evidence instead.
		min := v.MinConfidence
		if min == 0 {
			min = DefaultMinConfidence
		}
		if math.IsNaN(c.Confidence) || c.Confidence < min {
			return DropLowConfidence, fmt.Sprintf("confidence %v < %v", c.Confidence, min)
		}
	}
	fillServer(c, cited)
	if reason, detail := poisoned(c, cited, task); reason != "" {
		return reason, detail
	}
	if v.quotesSecret(c) {
		// Advice that needs a credential is a one-off value at best.
		return DropCredential, "the lesson quotes a secret"
	}
	if why := vocab.vague(c.Lesson, c.Tool); why != "" {
		return DropVague, why
	}
	if why := vacuousCandidate(c, cited); why != "" {
		return DropVacuous, why
	}
	if lit := oneOffLiteral(c, vals); lit != "" {
		return DropOneOff, fmt.Sprintf("quotes %q, a value of this task only", Truncate(lit, 40))
	}
	fillFromSteps(c, task, cited)
	if c.ErrorTemplate == "" {
		if f := firstFailure(c, cited); f != nil {
			c.ErrorTemplate = vals.abstractTemplate(templateOf(f))
		}
	}
	c.Confidence = evidencePrior(c, cited, vals)
	v.redact(c)
	return "", ""
}

// oneOffLiteral returns the first value of the task that c's texts quote,
// or "". What an agent reads of an experience (lesson, situation, action,
// result, template) may name tools, argument paths, value shapes, schema
// constants and what the error texts say, never one task's own values:
// ids, amounts, names, e-mails, dates.
func oneOffLiteral(c *hindsight.Experience, vals *taskValues) string {
	for _, f := range []string{c.Lesson, c.Situation, c.Action, c.Result, c.ErrorTemplate} {
		for _, lit := range literals(f) {
			if vals.oneOff(lit) {
				return lit
			}
		}
	}
	return ""
}

// evidencePrior is the confidence of a validated candidate seen in one
// task: Confidence(1, 0, unambiguous). Rules decide unambiguity as they
// derive the lesson (and say so with their candidate's confidence); for
// any other origin a lesson is unambiguous when a cited failure's error
// text points at what the lesson is about by structure, not by a shared
// word: it names an argument as one ("missing required argument: x",
// 'x' quoted, "x must…") or another tool by its name, and the lesson names
// it too; or it names the notation of a shape the lesson prescribes
// ("expected YYYY-MM-DD"). An error code, or a word of the error that
// happens to be an argument's name, grounds nothing.
func evidencePrior(c *hindsight.Experience, cited []*hindsight.Step, vals *taskValues) float64 {
	if c.Origin == "rules" {
		return min(c.Confidence, unambiguousPrior)
	}
	for _, s := range cited {
		if !s.Failed() {
			continue
		}
		text := errorText(s)
		for name := range vals.names {
			if name == s.Tool || len(name) < 3 || vals.codes[name] || !mentions(c.Lesson, name) {
				continue
			}
			if vals.tools[name] && namesTool(text, name) || !vals.tools[name] && namesArg(text, name, nil) {
				return unambiguousPrior
			}
		}
		if shapeNamed(text, c.Lesson) {
			return unambiguousPrior
		}
	}
	return singlePrior
}

// fillFromSteps completes c with what its cited steps say for sure.
func fillFromSteps(c *hindsight.Experience, task *hindsight.Task, cited []*hindsight.Step) {
	c.SourceTask = task.ID
	var failed *hindsight.Step
	for _, s := range cited {
		if s.Failed() && (c.Tool == "" || s.Tool == c.Tool) {
			failed = s
			break
		}
	}
	if c.Tool == "" {
		if failed != nil {
			c.Tool = failed.Tool
		} else {
			for _, s := range cited {
				if s.Tool != "" {
					c.Tool = s.Tool
					break
				}
			}
		}
	}
	for _, s := range cited {
		if s.Tool == c.Tool || c.Tool == "" {
			if c.Server == "" {
				c.Server = s.Server
			}
			if c.SourceAgent == "" {
				c.SourceAgent = s.ClientName
			}
		}
	}
	if c.ErrorCode == "" && failed != nil {
		c.ErrorCode = stepErrorCode(failed)
	}
}

// fillServer sets c's server from its cited calls of its tool when the
// candidate names none, so that the checks that ground a lesson in its
// server's calls know the server.
func fillServer(c *hindsight.Experience, cited []*hindsight.Step) {
	for _, s := range cited {
		if c.Server == "" && s.Tool != "" && (c.Tool == "" || s.Tool == c.Tool) {
			c.Server = s.Server
		}
	}
}

// firstFailure is the first failed step of c's tool among cited.
func firstFailure(c *hindsight.Experience, cited []*hindsight.Step) *hindsight.Step {
	for _, s := range cited {
		if s.Failed() && (c.Tool == "" || s.Tool == c.Tool) {
			return s
		}
	}
	return nil
}

// stepErrorCode is the most specific error code a step carries.
func stepErrorCode(s *hindsight.Step) string {
	if s.ErrorCode != "" {
		return s.ErrorCode
	}
	if s.Error != nil {
		return fmt.Sprint(s.Error.Code)
	}
	return ""
}

// quotesSecret reports whether c's lesson holds what the redactor takes
// for a secret (a model may answer "call login with token ghp_…"). The
// other texts are redacted and kept.
func (v *Validator) quotesSecret(c *hindsight.Experience) bool {
	if v.Redactor == nil {
		return false
	}
	_, n := v.Redactor.Redact(c.Lesson)
	return n > 0
}

// redact runs the redactor over every text field of c.
func (v *Validator) redact(c *hindsight.Experience) {
	if v.Redactor == nil {
		return
	}
	total := 0
	for _, f := range []*string{&c.Situation, &c.Action, &c.Result, &c.Lesson, &c.ErrorCode, &c.TaskType} {
		s, n := v.Redactor.Redact(*f)
		if n > 0 {
			*f = s
			total += n
		}
	}
	if total > 0 {
		v.Metrics.redaction(total)
		v.logger().Info("reflect: secrets removed from experience", "task", c.SourceTask, "redactions", total)
	}
}

// vocabulary is what a lesson may name to be concrete: the task's tools,
// argument names and error codes.
type vocabulary struct {
	tools  map[string]bool
	args   map[string]bool
	errors map[string]bool
}

func newVocabulary(t *hindsight.Task) *vocabulary {
	v := &vocabulary{tools: map[string]bool{}, args: map[string]bool{}, errors: map[string]bool{}}
	for i := range t.Steps {
		s := &t.Steps[i]
		if s.Tool != "" {
			v.tools[strings.ToLower(s.Tool)] = true
		}
		if code := stepErrorCode(s); code != "" {
			v.errors[strings.ToLower(code)] = true
		}
		var args map[string]json.RawMessage
		if json.Unmarshal(s.Arguments, &args) == nil {
			for k := range args {
				if len(k) > 1 {
					v.args[strings.ToLower(k)] = true
				}
			}
		}
	}
	return v
}

var (
	// genericAdvice matches advice that tells no one what to do.
	genericAdvice = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(be (more )?careful|careful(ly)?|double[- ]check|pay (close )?attention|make sure (that )?(everything|it|things|the (input|arguments?|parameters?) (is|are) (correct|valid|right))|ensure (that )?(the )?(input|inputs|arguments?|parameters?|everything) (is|are) (correct|valid|right|proper)|handle (errors|failures|exceptions) (properly|gracefully|appropriately|correctly)|verify (the )?(input|inputs|arguments?|parameters?)|try again|be mindful|think (carefully|before)|consider (checking|verifying)|(check|read) (the )?(documentation|docs)|use (the )?(correct|right|proper|appropriate|valid) (arguments?|parameters?|inputs?|values?|tools?|format))\b`)
	})
	// codeLike matches tokens that name something concrete: quoted or
	// back-quoted text, paths, key=value pairs, identifiers with _ . / or
	// inner capitals, numbers of three or more digits, date formats.
	codeLike = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("`[^`]+`|\"[^\"]+\"|'[^']{2,}'|(^|\\s)/[\\w.-]+|\\b\\w+=\\S+|\\b[a-z]+_[a-z_]+\\b|\\b[a-z]+[A-Z]\\w*\\b|\\b\\d{3,}\\b|\\b[A-Z]{2,}[A-Z_]*\\b|\\b(YYYY|yyyy)[-/.]")
	})
	wordRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[\pL\pN_./-]+`) })
	// commonAcronyms name nothing in particular.
	commonAcronyms = map[string]bool{"API": true, "APIs": true, "JSON": true, "HTTP": true, "HTTPS": true, "URL": true, "ID": true, "IDs": true, "OK": true, "MCP": true, "LLM": true, "AI": true, "UI": true, "IMPORTANT": true, "ALWAYS": true, "NEVER": true, "NOTE": true}
)

// vague returns why lesson is too vague to store, or "" when it names
// something concrete.
func (v *vocabulary) vague(lesson, tool string) string {
	words := wordRe().FindAllString(lesson, -1)
	if len(words) < 4 {
		return "fewer than four words"
	}
	anchors := 0
	ownToolOnly := true
	for _, w := range words {
		lw := strings.ToLower(strings.Trim(w, "./-"))
		switch {
		case v.tools[lw]:
			anchors++
			if !strings.EqualFold(lw, tool) {
				ownToolOnly = false
			}
		case v.args[lw] || v.errors[lw]:
			anchors++
			ownToolOnly = false
		}
	}
	if m := codeLike().FindAllString(lesson, -1); len(m) > 0 {
		for _, x := range m {
			x = strings.Trim(strings.TrimSpace(x), "`\"'")
			if commonAcronyms[x] {
				continue
			}
			if !strings.EqualFold(x, tool) {
				anchors++
				ownToolOnly = false
			}
		}
	}
	if anchors == 0 {
		return "names no tool, argument, error or concrete value"
	}
	if genericAdvice().MatchString(lesson) && ownToolOnly {
		return "generic advice: " + genericAdvice().FindString(lesson)
	}
	return ""
}

// Truncate shortens s to at most n bytes without splitting a UTF-8
// character.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
