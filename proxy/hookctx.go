package proxy

import (
	"context"
	"sync"
	"time"
)

// hookContext is the context a rewriting hook runs with. It has a deadline
// from the start, but arms a timer for it only when the hook asks for
// Done: most hooks never wait for anything and return within microseconds,
// and a timer per response (context.WithTimeout) cost the relay a tenth of
// its CPU. Err reports the deadline as soon as it has passed, timer or not.
// Contexts derived from it (context.WithCancel and the like) call Done and
// so arm the timer; they work as usual. Safe for concurrent use.
type hookContext struct {
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{} // made by the first Done
	timer *time.Timer   // armed by the first Done
	err   error
}

func newHookContext(now time.Time, d time.Duration) *hookContext {
	return &hookContext{deadline: now.Add(d)}
}

func (c *hookContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *hookContext) Value(any) any { return nil }

func (c *hookContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err == nil {
		if d := time.Until(c.deadline); d > 0 {
			c.timer = time.AfterFunc(d, func() { c.end(context.DeadlineExceeded) })
		} else {
			c.err = context.DeadlineExceeded
		}
	}
	if c.err != nil {
		close(c.done)
	}
	return c.done
}

func (c *hookContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !time.Now().Before(c.deadline) {
		c.endLocked(context.DeadlineExceeded)
	}
	return c.err
}

func (c *hookContext) String() string { return "proxy.hookContext" }

// end cancels c with err (the first reason sticks) and stops its timer.
func (c *hookContext) end(err error) {
	c.mu.Lock()
	c.endLocked(err)
	c.mu.Unlock()
}

func (c *hookContext) endLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
}
