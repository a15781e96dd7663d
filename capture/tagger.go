package capture

import (
	"bytes"
	"encoding/json"
	"hash/maphash"

	"github.com/hindsight-proxy/hindsight"
)

// A Tagger refines the causal tags of a session's steps with what came
// before them. Steps must be given in the order they completed. It is not
// safe for concurrent use.
//
// The rules, for a step of session S calling tool (or method) T:
//
//	cancelled  the requester cancelled it (kept as is)
//	retry      the same call (T and the same redacted arguments) as the
//	           previous step of S with the same method, if it failed again
//	           or succeeded with no failure of T to recover from
//	recovery   a success of T after a failure of T in S, with no success
//	           of T in between (a successful retry is a recovery)
//	failure,   the step's own outcome otherwise
//	timeout,
//	success
type Tagger struct {
	sessions map[string]*history
	order    []string // session ids, oldest first, to bound memory
	max      int
	buf      []byte // Tag's scratch: the slot and target of a step
}

// maxTaggedSessions bounds the sessions a Tagger remembers.
const maxTaggedSessions = 4096

// maxSessionNames bounds the call targets a session's history keeps for
// reuse; targets beyond it are still tagged, each one a new string.
const maxSessionNames = 1024

type history struct {
	last   map[string]*callKey // method+direction → the previous call
	failed map[string]bool     // call target → failed since its last success
	names  map[string]string   // the call targets seen, to reuse their strings
}

// name returns b as a string, the session's own copy when it saw b before.
func (h *history) name(b []byte) string {
	if n, ok := h.names[string(b)]; ok {
		return n
	}
	n := string(b)
	if len(h.names) < maxSessionNames {
		h.names[n] = n
	}
	return n
}

type callKey struct {
	target string
	args   uint64 // maphash of the compacted arguments
}

// NewTagger returns an empty Tagger.
func NewTagger() *Tagger {
	return &Tagger{sessions: map[string]*history{}, max: maxTaggedSessions}
}

// Tag sets s.CausalTag from its own outcome (set by BuildStep) and the
// session's history, and records s in that history.
func (t *Tagger) Tag(s *hindsight.Step) {
	h := t.session(s.SessionID)
	// slot is "direction method", target adds " tool": built in buf, so
	// that a call seen before in the session allocates nothing.
	b := append(append(append(t.buf[:0], s.Direction...), ' '), s.Method...)
	slot := len(b)
	if s.Tool != "" {
		b = append(append(b, ' '), s.Tool...)
	}
	t.buf = b
	target := h.name(b)
	args := argsHash(s.Arguments)
	prev, hasPrev := h.last[string(b[:slot])]
	if !hasPrev {
		prev = &callKey{}
		h.last[string(b[:slot])] = prev
	}
	same := hasPrev && prev.target == target && prev.args == args
	*prev = callKey{target: target, args: args}

	switch s.CausalTag {
	case hindsight.TagCancelled:
		return
	case hindsight.TagFailure, hindsight.TagTimeout:
		h.failed[target] = true
		if same {
			s.CausalTag = hindsight.TagRetry
		}
	default:
		switch {
		case h.failed[target]:
			s.CausalTag = hindsight.TagRecovery
		case same:
			s.CausalTag = hindsight.TagRetry
		default:
			s.CausalTag = hindsight.TagSuccess
		}
		delete(h.failed, target)
	}
}

// Forget drops the history of a session that ended.
func (t *Tagger) Forget(sessionID string) {
	delete(t.sessions, sessionID)
}

func (t *Tagger) session(id string) *history {
	if h, ok := t.sessions[id]; ok {
		return h
	}
	if len(t.order) >= 2*t.max {
		// Drop ids of sessions already forgotten.
		live := t.order[:0]
		for _, id := range t.order {
			if _, ok := t.sessions[id]; ok {
				live = append(live, id)
			}
		}
		t.order = live
	}
	for len(t.order) > 0 && len(t.sessions) >= t.max {
		delete(t.sessions, t.order[0])
		t.order = t.order[1:]
	}
	h := &history{last: map[string]*callKey{}, failed: map[string]bool{}, names: map[string]string{}}
	t.sessions[id] = h
	t.order = append(t.order, id)
	return h
}

// argsHash hashes arguments as compacted JSON would be hashed, so that the
// same call sent with other whitespace is still the same: it feeds the
// hash the runs between whitespace outside strings, in one pass (maphash
// gives the same sum however the bytes are split).
func argsHash(raw json.RawMessage) uint64 {
	var h maphash.Hash
	h.SetSeed(argsSeed)
	start := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			i = closingQuote(raw, i)
		case ' ', '\t', '\r', '\n':
			h.Write(raw[start:i])
			start = i + 1
		}
	}
	h.Write(raw[start:])
	return h.Sum64()
}

var argsSeed = maphash.MakeSeed()

// closingQuote returns the index of the quote that closes the JSON string
// opening at raw[open], or len(raw) when none does. It looks for quotes
// with bytes.IndexByte and counts the backslashes before each.
func closingQuote(raw []byte, open int) int {
	for i := open + 1; ; {
		q := bytes.IndexByte(raw[i:], '"')
		if q < 0 {
			return len(raw)
		}
		q += i
		escaped := false
		for k := q - 1; k > open && raw[k] == '\\'; k-- {
			escaped = !escaped
		}
		if !escaped {
			return q
		}
		i = q + 1
	}
}
