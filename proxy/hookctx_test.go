package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

func TestHookContext(t *testing.T) {
	t.Run("no timer until Done", func(t *testing.T) {
		c := newHookContext(time.Now(), time.Hour)
		if d, ok := c.Deadline(); !ok || time.Until(d) < 59*time.Minute {
			t.Errorf("deadline %v %v", d, ok)
		}
		if c.Err() != nil || c.timer != nil {
			t.Fatalf("err %v timer %v before Done", c.Err(), c.timer)
		}
		done := c.Done()
		if c.timer == nil || c.Done() != done {
			t.Fatal("Done armed no timer, or returned another channel")
		}
		c.end(context.Canceled)
		<-done
		if !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("err %v, want Canceled", c.Err())
		}
		c.end(context.DeadlineExceeded) // the first reason sticks
		if !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("err %v after a second end, want Canceled", c.Err())
		}
	})
	t.Run("deadline fires through Done", func(t *testing.T) {
		c := newHookContext(time.Now(), 20*time.Millisecond)
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed at the deadline")
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Errorf("err %v", c.Err())
		}
	})
	t.Run("Err sees an expired deadline without a timer", func(t *testing.T) {
		c := newHookContext(time.Now().Add(-time.Second), time.Millisecond)
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v", c.Err())
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done of an expired context is open")
		}
		if c.timer != nil {
			t.Error("timer armed for an expired context")
		}
	})
	t.Run("derived contexts", func(t *testing.T) {
		c := newHookContext(time.Now(), time.Hour)
		child, cancel := context.WithCancel(c)
		defer cancel()
		stopped := make(chan struct{})
		context.AfterFunc(c, func() { close(stopped) })
		c.end(context.Canceled)
		select {
		case <-child.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("derived context not cancelled")
		}
		<-stopped
		if !errors.Is(context.Cause(child), context.Canceled) || c.timer == nil {
			t.Errorf("cause %v", context.Cause(child))
		}
	})
	t.Run("concurrent use", func(t *testing.T) {
		c := newHookContext(time.Now(), 5*time.Millisecond)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 100 {
					c.Err()
					c.Deadline()
				}
				<-c.Done()
			})
		}
		wg.Wait()
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Errorf("err %v", c.Err())
		}
	})
}

// TestConnHookContext checks what a rewriting hook's ctx promises: the
// Conn's timeout as its deadline, a wait on it that ends there, and
// cancellation once the hook returned.
func TestConnHookContext(t *testing.T) {
	var kept context.Context
	waited := make(chan error, 1)
	c := &Conn{Session: &Session{ID: "s", Server: "srv"}, Logger: slog.New(slog.DiscardHandler),
		HookTimeout: 30 * time.Millisecond,
		Hooks: &Hooks{ToolResult: func(ctx context.Context, ex *Exchange, result json.RawMessage) json.RawMessage {
			kept = ctx
			if d, ok := ctx.Deadline(); !ok || time.Until(d) > 30*time.Millisecond {
				t.Errorf("deadline %v %v, want within the hook timeout", d, ok)
			}
			if string(ex.ID) == "2" {
				<-ctx.Done() // a hook that waits is stopped at the deadline
				waited <- ctx.Err()
			}
			return nil
		}}}
	for _, id := range []string{"1", "2"} {
		c.FromClient([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"x"}}`))
		resp := `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[]}}`
		if out := c.FromServer([]byte(resp)); string(out) != resp {
			t.Errorf("relayed %s, want %s", out, resp)
		}
		if kept == nil || kept.Err() == nil {
			t.Fatalf("id %s: hook context not cancelled after the hook returned", id)
		}
	}
	if err := <-waited; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting hook saw %v, want DeadlineExceeded", err)
	}
}

// BenchmarkHookContext compares a hook context that is never waited on with
// context.WithTimeout, which arms a timer every time.
func BenchmarkHookContext(b *testing.B) {
	b.Run("hookContext", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := newHookContext(time.Now(), time.Second)
			c.end(context.Canceled)
		}
	})
	b.Run("WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, cancel := context.WithTimeout(context.Background(), time.Second)
			cancel()
		}
	})
}
