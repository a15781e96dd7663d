// Package spooltest provides stand-ins for the daemon a spool delivers
// to, and the checks tests of spool and of its users make on what was
// delivered. Like net/http/httptest it is imported by tests only.
//
// It does not import spool, so spool's own tests can use it: a stand-in
// that refuses a step returns the error its Refuse func makes.
package spooltest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// Base is when the first of a test's steps starts; step i starts i
// seconds later. CheckInOrder expects that. It is an hour before the test
// binary started (with a nanosecond part, to catch rounding), never a fixed
// date: an outbox removes steps older than its retention period, so steps
// of a fixed date would expire in the tests once that date is a week old.
var Base = time.Now().UTC().Truncate(time.Second).Add(-time.Hour + 123456789)

// Collector is a Deliverer standing in for the daemon client: it keeps
// the steps it is given, and can be set down or told to refuse steps.
// Its zero value accepts everything.
type Collector struct {
	// Refuse, when set, is asked about each step of a batch; an error it
	// returns fails the whole batch and nothing of it is kept.
	Refuse func(hindsight.Step) error

	mu    sync.Mutex
	steps []hindsight.Step
	down  bool
}

// Deliver keeps steps, or fails as a daemon that is down (see SetDown) or
// refuses one of them (see Refuse) would.
func (c *Collector) Deliver(ctx context.Context, steps []hindsight.Step) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return errors.New("dial unix hindsight.sock: connect: connection refused")
	}
	for _, s := range steps {
		if c.Refuse != nil {
			if err := c.Refuse(s); err != nil {
				return err
			}
		}
	}
	c.steps = append(c.steps, steps...)
	return nil
}

// SetDown makes Deliver fail as a daemon that does not answer (true), or
// accept again (false).
func (c *Collector) SetDown(down bool) { c.mu.Lock(); c.down = down; c.mu.Unlock() }

// Got returns a copy of the steps delivered so far, in delivery order.
func (c *Collector) Got() []hindsight.Step {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]hindsight.Step(nil), c.steps...)
}

// Reject returns a Refuse func that refuses the steps bad reports, with an
// error that wraps rejected (spool.ErrRejected: the daemon read the step
// and will never take it).
func Reject(rejected error, bad func(hindsight.Step) bool) func(hindsight.Step) error {
	return func(s hindsight.Step) error {
		if bad(s) {
			return errors.Join(rejected, errors.New("bad step"))
		}
		return nil
	}
}

// SlowCollector is a Deliverer that acknowledges every batch after its
// delay, or fails when the context ends first; it counts what it took.
type SlowCollector struct {
	mu    sync.Mutex
	delay time.Duration
	held  chan struct{} // non-nil while Hold holds deliveries back
	n     int
}

// NewSlowCollector returns a SlowCollector that waits delay per batch.
func NewSlowCollector(delay time.Duration) *SlowCollector {
	return &SlowCollector{delay: delay}
}

// Deliver waits the delay, then counts steps as delivered.
func (c *SlowCollector) Deliver(ctx context.Context, steps []hindsight.Step) error {
	c.mu.Lock()
	d, held := c.delay, c.held
	c.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(steps)
	return nil
}

// SetDelay changes the wait of the batches delivered from now on.
func (c *SlowCollector) SetDelay(d time.Duration) { c.mu.Lock(); c.delay = d; c.mu.Unlock() }

// Hold makes every batch wait, however long, until Release: a test that
// needs the daemon to answer late waits for what it expects to happen
// meanwhile rather than racing a delay.
func (c *SlowCollector) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = make(chan struct{})
	}
}

// Release lets the batches Hold held back, and those after, through.
func (c *SlowCollector) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		close(c.held)
		c.held = nil
	}
}

// Count returns how many steps were delivered.
func (c *SlowCollector) Count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// CheckInOrder fails t unless got holds n steps of source numbered 1..n,
// step i starting i seconds after Base, with no "-secret" left in a
// request.
func CheckInOrder(t testing.TB, got []hindsight.Step, n int, source string) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("delivered %d steps, want %d", len(got), n)
	}
	for i, s := range got {
		if s.Seq != uint64(i+1) || s.Source != source {
			t.Fatalf("step %d: source %q seq %d, want %q %d", i, s.Source, s.Seq, source, i+1)
		}
		if !s.StartedAt.Equal(Base.Add(time.Duration(i) * time.Second)) {
			t.Fatalf("step %d: started_at %v lost its original timestamp", i, s.StartedAt)
		}
		if strings.Contains(string(s.Request), "-secret") {
			t.Fatalf("step %d: token not redacted: %s", i, s.Request)
		}
	}
}
