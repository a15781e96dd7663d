package reflect

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/bpe"
)

// DefaultTokenBudget bounds the rendered trajectory of one task.
const DefaultTokenBudget = 6000

// Tokenizer counts tokens the way the model does.
type Tokenizer interface {
	Count(s string) int
}

var (
	encMu sync.Mutex
	encs  = map[string]*bpe.Encoder{}
)

// NewTokenizer returns the tokenizer for model: the encoding tiktoken gives
// the OpenAI models it knows, o200k_base for others (right for current
// OpenAI models and close enough for the rest). Each encoding is loaded
// once, from the rank file compiled into the binary, and shared; it never
// touches the network.
func NewTokenizer(model string) (Tokenizer, error) {
	name := bpe.ForModel(model)
	encMu.Lock()
	defer encMu.Unlock()
	if e, ok := encs[name]; ok {
		return e, nil
	}
	e, err := bpe.Load(name)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", name, err)
	}
	encs[name] = e
	return e, nil
}

// Renderer writes a task's trajectory compactly for a model: one line per
// tools/call step with its index, causal tag, tool, arguments, error code
// and a shortened result. It fits the rendering into Budget tokens by
// shortening bodies further and then eliding routine successes far from
// any failure.
type Renderer struct {
	Tokenizer Tokenizer
	Budget    int // tokens; 0 means DefaultTokenBudget
	// BodyLimit caps each argument or result body, in bytes, before the
	// budget is applied; 0 means 400.
	BodyLimit int
}

// Render returns the trajectory of t and its token count.
func (r *Renderer) Render(t *hindsight.Task) (string, int) {
	budget := r.Budget
	if budget <= 0 {
		budget = DefaultTokenBudget
	}
	limit := r.BodyLimit
	if limit <= 0 {
		limit = 400
	}
	lines := r.lines(t)
	keep := make([]bool, len(lines))
	for i := range keep {
		keep[i] = true
	}
	var out string
	var n int
	for limit >= 24 {
		out = joinLines(lines, keep, limit)
		// Tokens average well under 8 bytes: skip counting what cannot fit.
		if len(out) <= 8*budget {
			if n = r.Count(out); n <= budget {
				return out, n
			}
		}
		limit /= 2
	}
	// Still too long: drop successes, farthest from a failure first. Count
	// each line once and subtract, then check the joined text.
	cost := make([]int, len(lines))
	total := 0
	for i := range lines {
		cost[i] = r.Count(joinLines(lines[i:i+1], keep[i:i+1], limit))
		total += cost[i]
	}
	order := elisionOrder(lines)
	next := 0
	for ; next < len(order) && total > budget*9/10; next++ {
		keep[order[next]] = false
		total -= cost[order[next]]
	}
	out = joinLines(lines, keep, limit)
	n = r.Count(out)
	for ; n > budget && next < len(order); next++ {
		keep[order[next]] = false
		out = joinLines(lines, keep, limit)
		n = r.Count(out)
	}
	// Failures alone exceed the budget: keep the head that fits.
	for n > budget && len(out) > 0 {
		cut := len(out) * budget / n * 9 / 10
		for cut > 0 && !utf8RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "\n…[trajectory cut to fit the token budget]\n"
		n = r.Count(out)
	}
	return out, n
}

// Count returns the number of tokens in s, or an estimate of four bytes a
// token without a Tokenizer.
func (r *Renderer) Count(s string) int {
	if r.Tokenizer == nil {
		return len(s) / 4
	}
	return r.Tokenizer.Count(s)
}

// line is one rendered step before shortening.
type line struct {
	index            int
	failed           bool
	head             string // "#3 [failure] server/tool"
	args, body, tail string
}

func (r *Renderer) lines(t *hindsight.Task) []line {
	var out []line
	for i := range t.Steps {
		s := &t.Steps[i]
		if s.Direction == hindsight.ServerToClient || s.Local {
			continue
		}
		if s.Method != "tools/call" && !s.Failed() {
			continue
		}
		l := line{index: s.StepIndex, failed: s.Failed()}
		tag := s.CausalTag
		if tag == "" {
			tag = hindsight.TagSuccess
			if s.Failed() {
				tag = hindsight.TagFailure
			}
		}
		name := s.Tool
		if name == "" {
			name = s.Method
		}
		if s.Server != "" {
			name = s.Server + "/" + name
		}
		l.head = fmt.Sprintf("#%d [%s] %s", s.StepIndex, tag, name)
		l.args = string(compactJSON(s.Arguments))
		if s.Failed() {
			code := stepErrorCode(s)
			if code == "" {
				code = "?"
			}
			l.tail = " error_code=" + code
			l.body = errorText(s)
		} else {
			l.body = resultText(s)
		}
		if s.LatencyMS > 0 {
			l.tail += fmt.Sprintf(" %.0fms", s.LatencyMS)
		}
		out = append(out, l)
	}
	return out
}

// resultText is the text of a result, or its compact JSON.
func resultText(s *hindsight.Step) string {
	if t := errorText(s); t != "error" && t != "timed out" {
		return t
	}
	return string(compactJSON(s.Result))
}

func joinLines(lines []line, keep []bool, limit int) string {
	var b strings.Builder
	skipped, from := 0, -1
	flush := func() {
		if skipped > 0 {
			fmt.Fprintf(&b, "… %d routine successful steps omitted (from #%d) …\n", skipped, from)
			skipped, from = 0, -1
		}
	}
	for i, l := range lines {
		if !keep[i] {
			if skipped == 0 {
				from = l.index
			}
			skipped++
			continue
		}
		flush()
		b.WriteString(l.head)
		if l.args != "" && l.args != "null" {
			b.WriteString(" args=")
			b.WriteString(shorten(l.args, limit))
		}
		b.WriteString(l.tail)
		if l.body != "" && l.body != "null" {
			b.WriteString(" → ")
			b.WriteString(shorten(l.body, limit))
		}
		b.WriteByte('\n')
	}
	flush()
	return b.String()
}

// shorten cuts s to about limit bytes, keeping its head and tail and saying
// how much was left out.
func shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	head := limit * 2 / 3
	tail := limit - head
	for head > 0 && !utf8RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8RuneStart(s[start]) {
		start++
	}
	return fmt.Sprintf("%s…[%d bytes cut]…%s", s[:head], start-head, s[start:])
}

// elisionOrder lists the successful lines, farthest from any failure first.
func elisionOrder(lines []line) []int {
	const far = 1 << 30
	dist := make([]int, len(lines))
	last := -far
	for i := range lines {
		if lines[i].failed {
			last = i
		}
		dist[i] = i - last
	}
	next := far
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i].failed {
			next = i
		}
		dist[i] = min(dist[i], next-i)
	}
	var order []int
	for i, l := range lines {
		if !l.failed {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		if dist[order[a]] != dist[order[b]] {
			return dist[order[a]] > dist[order[b]]
		}
		return order[a] > order[b]
	})
	return order
}
