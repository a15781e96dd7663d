package memory

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
// the rejected lessons and counted. The list is kept in a file under the
// home (QuarantineFile), so it outlives the daemon; without one it
// lives as long as the daemon.
type quarantine struct {
	mu      sync.Mutex
	entries map[string]Rejection // by namespace and id
	path    string               // "": memory only
	counter *prometheus.CounterVec
}

// QuarantineFile is the file, in the home, that keeps the quarantined
// lessons across restarts (JSON, the newest MaxQuarantined).
const QuarantineFile = "quarantine.json"

// MaxQuarantined bounds the quarantine list; the oldest entries go first.
const MaxQuarantined = 1000

// quarantineEntry is one line of the quarantine file.
type quarantineEntry struct {
	Key string `json:"key"`
	Rejection
}

// newQuarantine returns the quarantine kept in path ("": memory only),
// with the entries path holds; a file that cannot be read is logged and
// replaced at the next quarantine.
func newQuarantine(path string, logger *slog.Logger) *quarantine {
	q := &quarantine{entries: map[string]Rejection{}, path: path, counter: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hindsight_daemon_lessons_quarantined_total",
		Help: "Stored lessons withheld when read because their text failed validation, by reason."}, []string{"reason"})}
	if path == "" {
		return q
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return q
	}
	var list []quarantineEntry
	if err == nil {
		err = json.Unmarshal(b, &list)
	}
	if err != nil {
		logger.Warn("read the quarantine list; starting an empty one", "file", path, "err", err)
		return q
	}
	for _, e := range list {
		q.entries[e.Key] = e.Rejection
	}
	return q
}

// save writes the list to its file, newest first, at most MaxQuarantined
// entries (the oldest are dropped from memory too). q.mu is held.
func (q *quarantine) save() error {
	if q.path == "" {
		return nil
	}
	list := make([]quarantineEntry, 0, len(q.entries))
	for k, r := range q.entries {
		list = append(list, quarantineEntry{Key: k, Rejection: r})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].At.After(list[j].At) })
	for _, e := range list[min(len(list), MaxQuarantined):] {
		delete(q.entries, e.Key)
	}
	list = list[:min(len(list), MaxQuarantined)]
	b, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("encode quarantine list: %w", err)
	}
	tmp := q.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write quarantine list: %w", err)
	}
	if err := os.Rename(tmp, q.path); err != nil {
		return fmt.Errorf("write quarantine list: %w", err)
	}
	return nil
}

// screen returns res without the lessons that fail guard.Check, which it
// quarantines.
func (s *Service) screen(res []hindsight.ScoredExperience) []hindsight.ScoredExperience {
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

func (s *Service) quarantined(e *hindsight.Experience, f *guard.Finding) {
	q := s.quar
	key := e.Namespace + "\x00" + e.ID
	q.mu.Lock()
	_, seen := q.entries[key]
	var err error
	if !seen {
		q.entries[key] = Rejection{TaskID: e.ID, At: time.Now().UTC(), Reason: QuarantineReason + f.Reason, Detail: f.Match,
			Server: e.Server, Tool: e.Tool, Origin: e.Origin, Lesson: guard.Printable(cutLesson(e.Lesson))}
		err = q.save()
	}
	q.mu.Unlock()
	if err != nil {
		s.Logger.Warn("keep the quarantine list; it lasts until the daemon stops", "err", err)
	}
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
