package daemon

import (
	"sort"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/prometheus/client_golang/prometheus"
)

// QuarantineReason prefixes the reason of a quarantined lesson in the
// rejected list: "quarantined: prompt_manipulation".
const QuarantineReason = "quarantined: "

// CheckText runs guard.CheckLesson over every text of e an agent may
// read.
func CheckText(e *hindsight.Experience) *guard.Finding {
	return guard.CheckLesson(e.Lesson, e.Situation, e.Action, e.Result, e.ErrorTemplate, e.TaskType)
}

// quarantine holds the stored lessons that failed guard.Check when they
// were read: lessons stored before the check existed, or written into a
// shared store by another daemon. They stay in the store (an operator
// forgets or edits them) and are never told; each is listed once among
// the rejected lessons and counted. The list lives as long as the
// daemon; a lesson fails again, and is listed again, when next read.
type quarantine struct {
	mu      sync.Mutex
	entries map[string]Rejection // by namespace and id
	counter *prometheus.CounterVec
}

func newQuarantine() *quarantine {
	return &quarantine{entries: map[string]Rejection{}, counter: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hindsight_daemon_lessons_quarantined_total",
		Help: "Stored lessons withheld when read because their text failed validation, by reason."}, []string{"reason"})}
}

// screen returns res without the lessons that fail guard.Check, which it
// quarantines.
func (s *Server) screen(res []hindsight.ScoredExperience) []hindsight.ScoredExperience {
	kept := res[:0]
	for i := range res {
		if f := CheckText(&res[i].Experience); f != nil {
			s.quarantined(&res[i].Experience, f)
			continue
		}
		kept = append(kept, res[i])
	}
	return kept
}

func (s *Server) quarantined(e *hindsight.Experience, f *guard.Finding) {
	q := s.quar
	key := e.Namespace + "\x00" + e.ID
	q.mu.Lock()
	_, seen := q.entries[key]
	if !seen {
		q.entries[key] = Rejection{TaskID: e.ID, At: time.Now().UTC(), Reason: QuarantineReason + f.Reason, Detail: f.Match,
			Server: e.Server, Tool: e.Tool, Origin: e.Origin, Lesson: guard.Printable(cutLesson(e.Lesson))}
	}
	q.mu.Unlock()
	if !seen {
		q.counter.WithLabelValues(f.Reason).Inc()
		s.Logger.Warn("lesson quarantined: its text fails validation", "experience", e.ID, "namespace", e.Namespace,
			"origin", e.Origin, "reason", f.Reason)
	}
}

// list returns the quarantined lessons, newest first.
func (q *quarantine) list() []Rejection {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Rejection, 0, len(q.entries))
	for _, r := range q.entries {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out
}

func cutLesson(s string) string {
	if len(s) <= 200 {
		return s
	}
	n := 200
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
