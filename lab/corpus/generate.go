// Package corpus generates, writes and loads a synthetic multi-task trace
// corpus for measuring learning quality: whether lessons learned from some
// tasks help different tasks.
//
// The corpus (testdata/corpus at the repository root) is what `hindsight
// traces export` would print for 60 agent tasks against four kinds of MCP
// servers: shop (an e-commerce order and returns support desk), calendar,
// repo (a git code host) and files. Errors recur across tasks with their
// variable parts (ids, dates, amounts, paths) different each time, and are
// recovered in six ways (see the Recovery constants). labels.jsonl says,
// for every failed tools/call step, which error class it belongs to, how
// the agent recovered and at which step.
//
// Generate is deterministic: a PCG seeded with constants, no clock, no map
// iteration order. The first half of the tasks (by start time) and the
// second half contain the same multiset of error episodes, so an evaluation
// can learn from the first half and measure on the unseen second half.
package corpus

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
)

// Corpus shape.
const (
	// Tasks is the number of tasks generated.
	Tasks = 60
	// perHalf is how many times each error class occurs in each half.
	perHalf = 3
	// cleanPerHalf is the number of tasks without any failure per half.
	cleanPerHalf = 4
	// maxCalls and minCalls bound the tools/call steps of a task.
	minCalls, maxCalls = 5, 20
)

// Source is the step source (outbox id) of every step of the corpus.
const Source = "corpus"

// seed of the generator; changing it changes every value of the corpus.
var seed = [2]uint64{0x68696e6473696768, 0x74636f7270757331}

// corpusStart is the Monday the tasks' three weeks begin.
var corpusStart = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// Generate returns the corpus: its steps grouped by task, tasks in start
// time order, steps in step_index order; and one label per failed
// tools/call step, in the same order. It returns the same corpus on every
// call.
func Generate() (steps []hindsight.Step, labels []Label) {
	g := &gen{r: rand.New(rand.NewPCG(seed[0], seed[1])), used: map[string]bool{}}
	starts := g.startTimes()
	plans := append(g.planHalf(Tasks/2), g.planHalf(Tasks-Tasks/2)...)
	tagger := capture.NewTagger()
	var seq uint64
	for i, p := range plans {
		t := g.newTask(starts[i])
		t.run(p)
		ss, ls := t.finish(tagger, &seq)
		steps = append(steps, ss...)
		labels = append(labels, ls...)
	}
	return steps, labels
}

// gen holds the generator's random source and the values already handed
// out, so that no task's ids, e-mails, names, paths or dates appear in
// another task.
type gen struct {
	r    *rand.Rand
	used map[string]bool
	// dateEpisodes counts the create_event_date_format episodes staged.
	dateEpisodes int
}

// fresh calls mk until it returns a value not handed out before, and
// returns it.
func (g *gen) fresh(mk func() string) string {
	for range 10000 {
		if v := mk(); !g.used[v] {
			g.used[v] = true
			return v
		}
	}
	panic("corpus: value pool exhausted")
}

func (g *gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

// between returns a random integer in [lo, hi].
func (g *gen) between(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

// chance reports true with probability p.
func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) hex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[g.r.IntN(16)]
	}
	return string(b)
}

// startTimes returns the tasks' start times, sorted, on the 21 days from
// corpusStart, in working hours (UTC), at least 20 minutes apart.
func (g *gen) startTimes() []time.Time {
	var ts []time.Time
	for len(ts) < Tasks {
		day := corpusStart.AddDate(0, 0, g.r.IntN(21))
		t := day.Add(time.Duration(g.between(7*3600, 18*3600)) * time.Second)
		if !slices.ContainsFunc(ts, func(u time.Time) bool { d := t.Sub(u); return d > -20*time.Minute && d < 20*time.Minute }) {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// A plan is the error episodes one task will run into.
type plan struct {
	episodes []epSpec
}

// epSpec is an error episode to stage: its class and, for the classes
// that can hit any of several servers, the server.
type epSpec struct {
	class  string
	server string
}

// planHalf plans n tasks: every error class perHalf times, cleanPerHalf
// tasks without failure, the rest with one or two episodes each (three if
// there are too many episodes for pairs), in a random order. One task has
// both refund_payment errors.
func (g *gen) planHalf(n int) []plan {
	var eps []epSpec
	for _, c := range classes {
		for range perHalf {
			s := c.servers[g.r.IntN(len(c.servers))]
			eps = append(eps, epSpec{class: c.name, server: s})
		}
	}
	g.r.Shuffle(len(eps), func(i, j int) { eps[i], eps[j] = eps[j], eps[i] })
	plans := make([]plan, n)
	// One task runs into both errors of refund_payment.
	for _, c := range []string{ClassMissingCurrency, ClassExceedsCaptured} {
		j := slices.IndexFunc(eps, func(e epSpec) bool { return e.class == c })
		plans[0].episodes = append(plans[0].episodes, eps[j])
		eps = slices.Delete(eps, j, j+1)
	}
	slots := n - cleanPerHalf
	for i := 1; i < slots; i++ {
		left := slots - i
		p := &plans[i]
		p.episodes = append(p.episodes, eps[0])
		eps = eps[1:]
		for {
			// Episodes beyond one per remaining slot go to this task: one
			// more, or two while pairs alone could not absorb them.
			need := len(eps) - (left - 1)
			if need <= 0 || len(p.episodes) == 3 || (len(p.episodes) == 2 && need <= left-1) {
				break
			}
			j := slices.IndexFunc(eps, func(e epSpec) bool { return compatible(p.episodes, e) })
			if j < 0 {
				break
			}
			p.episodes = append(p.episodes, eps[j])
			eps = slices.Delete(eps, j, j+1)
		}
	}
	if len(eps) > 0 {
		panic(fmt.Sprintf("corpus: %d episodes left unplanned", len(eps)))
	}
	g.r.Shuffle(n, func(i, j int) { plans[i], plans[j] = plans[j], plans[i] })
	return plans
}

// compatible reports whether episode e can be staged in the same task as
// have: no class twice, at most two servers, at most one episode that
// attaches to any call of a server per server, and an archived repository
// takes no other repo episode.
func compatible(have []epSpec, e epSpec) bool {
	servers := map[string]bool{e.server: true}
	for _, h := range have {
		servers[h.server] = true
		if h.class == e.class || slices.Contains(sameCall, [2]string{h.class, e.class}) || slices.Contains(sameCall, [2]string{e.class, h.class}) {
			return false
		}
		if h.server == e.server && classOf(h.class).generic && classOf(e.class).generic {
			return false
		}
		if h.server == "repo" && e.server == "repo" && (h.class == ClassRepoArchived || e.class == ClassRepoArchived) {
			return false
		}
	}
	return len(servers) <= 2
}
