package weaviate

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// TestBreakerStates walks the breaker through its states with a clock and
// a probe of the test's: each step acts, then checks the answer, the
// probes made and whether the breaker is open.
func TestBreakerStates(t *testing.T) {
	refused := fmt.Errorf("dial tcp 127.0.0.1:1: %w", syscall.ECONNREFUSED)
	noAnswer := fmt.Errorf("%w: %w", errNoAnswer, refused)
	type step struct {
		name    string
		advance time.Duration
		probe   error  // what the probe answers in this step
		act     string // "allow", "trip <err>", "openAfter"
		callErr error  // trip's call error
		wantErr bool   // allow fails (ErrStoreUnavailable) or trip reports open
		probes  int    // probes made in this step
		open    bool
	}
	steps := []step{
		{name: "closed: calls go through unprobed", act: "allow"},
		{name: "a refusal by Weaviate does not trip", act: "trip", callErr: errors.New("status code: 422, validation failed")},
		{name: "unreachable but answering not ready: retry goes on", act: "trip", callErr: refused, probe: errNotReady, probes: 1},
		{name: "still closed", act: "allow"},
		{name: "unreachable and no answer: open", act: "trip", callErr: refused, probe: noAnswer, wantErr: true, probes: 1, open: true},
		{name: "open: fails at once, no probe within a second", advance: 500 * time.Millisecond, act: "allow", wantErr: true, open: true},
		{name: "a second on: one probe, still down", advance: 600 * time.Millisecond, act: "allow", probe: noAnswer, wantErr: true, probes: 1, open: true},
		{name: "just after that probe: none", advance: 10 * time.Millisecond, act: "allow", wantErr: true, open: true},
		{name: "trip while open: open, no probe", act: "trip", callErr: refused, wantErr: true, open: true},
		{name: "answers but not ready: still open", advance: time.Second, act: "allow", probe: errNotReady, wantErr: true, probes: 1, open: true},
		{name: "ready: closes, the call goes through", advance: time.Second, act: "allow", probes: 1},
		{name: "closed again: no probe", act: "allow"},
		{name: "a retry that ran out unavailable opens", act: "openAfter", open: true},
		{name: "opened by it: no probe at once", act: "allow", wantErr: true, open: true},
		{name: "ready a second on", advance: time.Second, act: "allow", probes: 1},
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var answer error
	probes := 0
	b := &breaker{every: time.Second, now: func() time.Time { return now },
		probe: func(context.Context) error { probes++; return answer }}
	ctx := context.Background()
	for _, s := range steps {
		now = now.Add(s.advance)
		answer, probes = s.probe, 0
		var failed bool
		switch s.act {
		case "allow":
			err := b.allow(ctx)
			failed = err != nil
			if failed && !errors.Is(err, hindsight.ErrStoreUnavailable) {
				t.Errorf("%s: %v, want ErrStoreUnavailable", s.name, err)
			}
		case "trip":
			failed = b.trip(ctx, s.callErr)
		case "openAfter":
			b.openAfter(fmt.Errorf("%w: %w", hindsight.ErrStoreUnavailable, refused))
		}
		if failed != s.wantErr || probes != s.probes || b.isOpen() != s.open {
			t.Errorf("%s: failed %v, %d probes, open %v; want %v, %d, %v", s.name, failed, probes, b.isOpen(), s.wantErr, s.probes, s.open)
		}
	}
}

// TestBreakerOneProbeInFlight: while one call probes an open breaker,
// others fail at once instead of probing or waiting.
func TestBreakerOneProbeInFlight(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	entered, release := make(chan struct{}), make(chan struct{})
	probes := 0
	b := &breaker{every: time.Second, now: func() time.Time { return now },
		probe: func(context.Context) error { probes++; close(entered); <-release; return nil }}
	b.openAfter(hindsight.ErrStoreUnavailable)
	now = now.Add(2 * time.Second)
	done := make(chan error)
	go func() { done <- b.allow(context.Background()) }()
	<-entered
	now = now.Add(2 * time.Second) // due again, but one is in flight
	if err := b.allow(context.Background()); !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Errorf("allow during a probe: %v, want ErrStoreUnavailable at once", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("the probing call after a ready answer: %v", err)
	}
	if probes != 1 || b.isOpen() {
		t.Errorf("%d probes, open %v; want 1, closed", probes, b.isOpen())
	}
}
