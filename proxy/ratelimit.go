package proxy

import (
	"sync"
	"time"
)

// rateLimit lets burst events through, then one per every. Events it
// drops are not forgotten: the next one it lets through reports how many,
// and when none comes, flush (when set) reports them once the next token is
// there, so a crash loop keeps showing at one line per every.
type rateLimit struct {
	mu      sync.Mutex
	burst   int
	every   time.Duration
	tokens  float64
	last    time.Time
	dropped int
	flush   func(dropped int)
	timer   *time.Timer
	stopped bool
}

// refill adds the tokens earned since the last event. l.mu is held.
func (l *rateLimit) refill(now time.Time) {
	if l.last.IsZero() {
		l.tokens = float64(l.burst)
	} else {
		l.tokens += float64(now.Sub(l.last)) / float64(l.every)
		if l.tokens > float64(l.burst) {
			l.tokens = float64(l.burst)
		}
	}
	l.last = now
}

// allow reports whether an event may be logged, and how many were dropped
// since the last one that was.
func (l *rateLimit) allow() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(time.Now())
	if l.tokens < 1 {
		l.dropped++
		if l.flush != nil && l.timer == nil && !l.stopped {
			l.timer = time.AfterFunc(time.Duration((1-l.tokens)*float64(l.every)), l.fire)
		}
		return false, 0
	}
	l.tokens--
	d := l.dropped
	l.dropped = 0
	return true, d
}

// fire reports the dropped events no later event reported.
func (l *rateLimit) fire() {
	l.mu.Lock()
	l.timer = nil
	if l.dropped == 0 || l.stopped {
		l.mu.Unlock()
		return
	}
	l.refill(time.Now())
	if l.tokens < 1 { // taken meanwhile: wait for the next
		l.timer = time.AfterFunc(time.Duration((1-l.tokens)*float64(l.every)), l.fire)
		l.mu.Unlock()
		return
	}
	l.tokens--
	d := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	l.flush(d)
}

// stop cancels a pending flush.
func (l *rateLimit) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}
