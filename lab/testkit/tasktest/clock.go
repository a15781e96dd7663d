package tasktest

import (
	"sync"
	"time"
)

// Clock is a settable time source, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that reads t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the time last set.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Set makes Now return t.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }
