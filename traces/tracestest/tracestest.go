// Package tracestest builds what tests of the trace store and of its users
// feed it: steps at known times, and a clock they set.
package tracestest

import (
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// T0 is the time the steps of Step are placed from.
var T0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

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

// Step makes a successful tools/call step (server fs, tool read_file) of
// source and seq, started at T0+at and lasting 100 ms.
func Step(source string, seq uint64, at time.Duration) hindsight.Step {
	return hindsight.Step{
		Source: source, Seq: seq, Server: "fs", Method: "tools/call", Tool: "read_file",
		StartedAt: T0.Add(at), EndedAt: T0.Add(at + 100*time.Millisecond), LatencyMS: 100,
		CausalTag: hindsight.TagSuccess, Direction: hindsight.ClientToServer,
	}
}

// Stdio returns s as a stdio sidecar of agent host process pid records it
// in session.
func Stdio(s hindsight.Step, session string, pid int) hindsight.Step {
	s.SessionID, s.HostPID, s.Transport = session, pid, "stdio"
	return s
}

// HTTP returns s as a Streamable HTTP sidecar records it in session.
func HTTP(s hindsight.Step, session string) hindsight.Step {
	s.SessionID, s.Transport = session, "streamable-http"
	return s
}

// Explicit returns s naming task as its task.
func Explicit(s hindsight.Step, task string) hindsight.Step {
	s.ExplicitTask = task
	return s
}
