package ui

import (
	"testing"
	"time"
)

// TestSessionsExpire: a session lives while used within sessionIdle, dies
// after sessionIdle unused or sessionMax in all, and the map never holds
// more than maxSessions.
func TestSessionsExpire(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ss := &sessions{now: func() time.Time { return now }}
	id := ss.begin()
	if ss.use(id) == nil || ss.use("") != nil || ss.use("nope") != nil {
		t.Fatal("a fresh session is not found, or an unknown one is")
	}
	for i := 0; i < 20; i++ { // used every 50 min: alive until sessionMax
		now = now.Add(50 * time.Minute)
		if alive := ss.use(id) != nil; alive != (i < 14) {
			t.Fatalf("after %v: alive %v", time.Duration(i+1)*50*time.Minute, alive)
		}
	}
	idle := ss.begin()
	now = now.Add(sessionIdle + time.Second)
	if ss.use(idle) != nil {
		t.Error("an idle session is still alive")
	}
	for i := 0; i < 3*maxSessions; i++ {
		ss.begin()
	}
	if n := len(ss.m); n > maxSessions {
		t.Errorf("%d sessions kept, want at most %d", n, maxSessions)
	}
}
