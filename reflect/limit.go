package reflect

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrBudget is returned when the hourly cap on LLM calls or tokens is
// reached. It is not the task's fault: the task waits, its attempts are not
// counted.
var ErrBudget = errors.New("hourly LLM budget reached")

// BudgetError says when the budget frees up again.
type BudgetError struct {
	Until time.Time
	What  string // "calls" or "tokens"
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%v: %s until %s", ErrBudget, e.What, e.Until.Format(time.RFC3339))
}

func (e *BudgetError) Unwrap() error { return ErrBudget }

// Budget caps LLM calls and tokens over a sliding hour. Zero caps mean no
// limit. It is safe for concurrent use.
type Budget struct {
	CallsPerHour  int
	TokensPerHour int

	mu     sync.Mutex
	events []spend
	now    func() time.Time // for tests
}

type spend struct {
	at            time.Time
	calls, tokens int
}

func (b *Budget) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

// prune drops what is older than an hour. b.mu is held.
func (b *Budget) prune(now time.Time) {
	i := 0
	for i < len(b.events) && now.Sub(b.events[i].at) >= time.Hour {
		i++
	}
	b.events = b.events[i:]
}

// Allow reports whether a call expecting to use tokens fits the budget, or
// a *BudgetError saying until when it does not.
func (b *Budget) Allow(tokens int) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock()
	b.prune(now)
	if b.CallsPerHour > 0 {
		calls := 0
		for _, e := range b.events {
			calls += e.calls
		}
		if calls >= b.CallsPerHour {
			until := now.Add(time.Hour)
			for _, e := range b.events {
				calls -= e.calls
				if calls < b.CallsPerHour {
					until = e.at.Add(time.Hour)
					break
				}
			}
			return &BudgetError{Until: until, What: "calls"}
		}
	}
	if b.TokensPerHour > 0 {
		used := 0
		for _, e := range b.events {
			used += e.tokens
		}
		if used+tokens > b.TokensPerHour {
			// Free enough of the oldest spending.
			until := now.Add(time.Hour)
			for _, e := range b.events {
				used -= e.tokens
				if used+tokens <= b.TokensPerHour {
					until = e.at.Add(time.Hour)
					break
				}
			}
			return &BudgetError{Until: until, What: "tokens"}
		}
	}
	return nil
}

// Spend records calls made and tokens used.
func (b *Budget) Spend(calls, tokens int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock()
	b.prune(now)
	b.events = append(b.events, spend{at: now, calls: calls, tokens: tokens})
}

// Used returns the calls and tokens spent in the last hour.
func (b *Budget) Used() (calls, tokens int) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prune(b.clock())
	for _, e := range b.events {
		calls += e.calls
		tokens += e.tokens
	}
	return calls, tokens
}
