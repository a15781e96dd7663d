package inject

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/hindsight-proxy/hindsight"
)

// Marker starts every text Hindsight adds to what the agent sees, so a model
// (and a human reading a transcript) can tell it from the server's own words.
const Marker = "[Hindsight]"

// Fixed answers of query_hindsight.
const (
	NoExperienceText = Marker + " No relevant past experience; decide from the current context."
	UnavailableText  = Marker + " Hindsight is unavailable right now (its daemon did not answer); decide from the current context."
	BudgetSpentText  = Marker + " This session's budget for past experience is spent; decide from the current context."
	// StoreUnavailableText is the answer when the daemon answered that its
	// experience store cannot be reached (hindsight.ErrStoreUnavailable).
	StoreUnavailableText = Marker + " Hindsight's experience store is unavailable right now; decide from the current context."
)

// block is one piece of text built from one experience.
type block struct {
	id   string
	text string
}

// experienceBlock formats e for a query_hindsight answer, lesson first so a
// cut never loses it, capped at max tokens.
func experienceBlock(n int, e *hindsight.ScoredExperience, max int) block {
	var b strings.Builder
	fmt.Fprintf(&b, "%d. ", n)
	if e.Tool != "" {
		b.WriteString(e.Tool)
	} else {
		b.WriteString("(any tool)")
	}
	var facts []string
	if e.ErrorCode != "" {
		facts = append(facts, "error "+e.ErrorCode)
	}
	if e.TaskType != "" {
		facts = append(facts, "task "+e.TaskType)
	}
	if e.Confidence > 0 {
		facts = append(facts, fmt.Sprintf("confidence %.2f", e.Confidence))
	}
	facts = append(facts, evidence(&e.Experience))
	if len(facts) > 0 {
		b.WriteString(" (" + strings.Join(facts, ", ") + ")")
	}
	b.WriteString("\n")
	line := func(label, s string) {
		if s = oneLine(s); s != "" {
			b.WriteString("   " + label + ": " + s + "\n")
		}
	}
	line("Lesson", e.Lesson)
	line("Situation", e.Situation)
	line("What was done", e.Action)
	line("Outcome", e.Result)
	return block{id: e.ID, text: TruncateTokens(strings.TrimRight(b.String(), "\n"), max)}
}

// lessonLine formats e as one bullet for the instructions or an error
// result, capped at max tokens.
func lessonLine(e *hindsight.ScoredExperience, withTool bool, max int) block {
	s := oneLine(e.Lesson)
	if s == "" {
		s = oneLine(e.Action)
	}
	if withTool && e.Tool != "" {
		s = e.Tool + ": " + s
	}
	// The evidence goes last and survives the cut: a model should know
	// how much a line rests on.
	suffix := " (" + evidence(&e.Experience) + ")"
	return block{id: e.ID, text: TruncateTokens("- "+s, max-CountTokens(suffix)) + suffix}
}

// evidence says how much evidence an experience has, for a model to weigh
// it: "seen in 3 tasks", "seen in 1 task, 1 counter-example".
func evidence(e *hindsight.Experience) string {
	n := max(e.EvidenceCount, 1)
	s := fmt.Sprintf("seen in %d task", n)
	if n != 1 {
		s += "s"
	}
	switch c := e.CounterCount; {
	case c == 1:
		s += ", 1 counter-example"
	case c > 1:
		s += fmt.Sprintf(", %d counter-examples", c)
	}
	return s
}

// oneLine folds s onto one line, without terminal escape sequences,
// control characters or bidirectional overrides: what Hindsight shows an
// agent is text, nothing that could restyle or reorder it.
func oneLine(s string) string {
	s = ansiEscape.ReplaceAllString(s, "")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case unicode.IsControl(r), r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F:
			return -1
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// ansiEscape matches terminal escape sequences (CSI and OSC).
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]`)

// assemble joins header, as many blocks as fit and footer into one text of
// at most limit tokens. Blocks are taken in order; the first that does not
// fit ends the list. It returns the text (empty when not even the first
// block fits), the ids of the blocks used and the text's token count.
func assemble(header string, blocks []block, sep, footer string, limit int) (string, []string, int) {
	var (
		text   string
		ids    []string
		tokens int
		parts  []string
	)
	for _, bl := range blocks {
		if bl.text == "" {
			continue
		}
		candidate := append(parts[:len(parts):len(parts)], bl.text)
		t := header + strings.Join(candidate, sep) + footer
		n := CountTokens(t)
		if n > limit {
			break
		}
		parts, text, tokens = candidate, t, n
		ids = append(ids, bl.id)
	}
	return text, ids, tokens
}
