package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"sync"
	"time"
)

// Browser sessions: the token URL is exchanged for a session id, which is
// what the cookie carries. Cookies ignore ports, so a cookie reaches every
// web server on 127.0.0.1: the session id is random, known only to this
// UI's memory, and dies after sessionIdle without a request or sessionMax
// after it began (or when the daemon stops); the token never leaves the
// URL that `hindsight ui` prints.
const (
	sessionIdle = time.Hour
	sessionMax  = 12 * time.Hour
	maxSessions = 256 // past it, the session closest to its end goes
)

// session is one browser's: csrf is the value its forms carry.
type session struct {
	csrf    string
	begun   time.Time
	lastUse time.Time
}

// sessions is the server-side map of session ids.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	now func() time.Time
}

func randomHex() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// begin starts a session and returns its id.
func (ss *sessions) begin() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.clock()
	if ss.m == nil {
		ss.m = map[string]*session{}
	}
	if len(ss.m) >= maxSessions {
		ss.sweep(now)
	}
	for len(ss.m) >= maxSessions {
		var oldest string
		for id, s := range ss.m {
			if oldest == "" || s.lastUse.Before(ss.m[oldest].lastUse) {
				oldest = id
			}
		}
		delete(ss.m, oldest)
	}
	id := randomHex()
	ss.m[id] = &session{csrf: randomHex(), begun: now, lastUse: now}
	return id
}

// use returns the live session of id, noting its use, or nil.
func (ss *sessions) use(id string) *session {
	if id == "" {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.clock()
	s := ss.m[id]
	if s == nil {
		return nil
	}
	if ss.expired(s, now) {
		delete(ss.m, id)
		return nil
	}
	s.lastUse = now
	return s
}

func (ss *sessions) expired(s *session, now time.Time) bool {
	return now.Sub(s.lastUse) > sessionIdle || now.Sub(s.begun) > sessionMax
}

// sweep drops the expired sessions; ss.mu is held.
func (ss *sessions) sweep(now time.Time) {
	for id, s := range ss.m {
		if ss.expired(s, now) {
			delete(ss.m, id)
		}
	}
}

func (ss *sessions) clock() time.Time {
	if ss.now != nil {
		return ss.now()
	}
	return time.Now()
}

// equal compares secrets in constant time; "" matches nothing.
func equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
