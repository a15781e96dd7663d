package reflect

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// Defaults of the dedupe sweep (Sweeper).
const (
	DefaultSweepInterval = 10 * time.Minute
	DefaultSweepMargin   = 2 * time.Minute
	DefaultSweepLookback = time.Hour
	DefaultSweepRetry    = 30 * time.Second
)

// The look for copies after adding (dedupe.go) can miss a copy on a
// replicated Weaviate: copies learnt while a node was down or just after
// it came back stayed live in load runs (docs/weaviate.md, Load), most
// likely because a list is answered from what one replica holds, which
// may lack the other daemon's write. The sweep looks again later, when
// the replicas have caught up.

// A Sweeper merges, now and then, the copies of a lesson that two daemons
// sharing a store learnt at the same moment and that the look after
// adding missed. Each sweep takes the live experiences reflection added
// (not imported or written by hand) since the previous successful sweep
// began (minus Margin; the first sweep goes back Lookback) and merges each one's copies by the very rule and code
// of the look after adding (Merger.dedupe): same namespace, tool and
// server, agreeing templates, the same lesson or a cosine of at least the
// threshold and not its opposite; the older copy survives, evidence and
// provenance united, pinned when either was, forgotten when either was.
//
// It needs no lock: a merge is idempotent (a copy already superseded by
// the survivor is left as it is; evidence already united adds nothing)
// and every sweeper picks the same survivor (the oldest, then the
// smallest id), so two sweepers, or a sweeper and a daemon's look after
// adding, that merge the same copies at once end in the same state; a
// write that loses a version race is read again and redone
// (Merger.mergeCopy). A sweep that fails is retried after Retry, still
// from the previous successful one; the first sweep after the store came
// back is followed by another one Margin later, for the copies learnt
// while the replicas were catching up.
type Sweeper struct {
	Merger *Merger
	// Interval between sweeps; 0 means DefaultSweepInterval.
	Interval time.Duration
	// Margin is how far before the previous sweep's start the next one
	// looks (clocks of daemons differ); 0 means DefaultSweepMargin.
	Margin time.Duration
	// Lookback is how far back the first sweep looks; 0 means
	// DefaultSweepLookback.
	Lookback time.Duration
	// Retry is the wait after a failed sweep; 0 means DefaultSweepRetry.
	Retry time.Duration
	// Report, when set, is told how many copies each sweep of Run merged.
	Report func(merged int)

	last time.Time // start of the last successful sweep
	now  func() time.Time
}

func (s *Sweeper) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Run sweeps at once and then every Interval until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	failed := false
	for {
		wait := orDefault(s.Interval, DefaultSweepInterval)
		n, err := s.Sweep(ctx)
		if s.Report != nil {
			s.Report(n)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.Merger.logger().Warn("reflect: sweep for copies of lessons", "err", err)
			failed, wait = true, orDefault(s.Retry, DefaultSweepRetry)
		} else if failed {
			failed, wait = false, min(wait, orDefault(s.Margin, DefaultSweepMargin))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Sweep runs one sweep and returns how many copies it merged.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	start := s.clock()
	since := start.Add(-orDefault(s.Lookback, DefaultSweepLookback))
	if !s.last.IsZero() {
		since = s.last.Add(-orDefault(s.Margin, DefaultSweepMargin))
	}
	all, err := s.Merger.Store.List(ctx, hindsight.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("sweep copies: %w", err)
	}
	var recent []hindsight.Experience
	for _, e := range all {
		// Only what reflection added, as the look after adding: an
		// imported or hand-written lesson is not a same-moment copy.
		if !e.CreatedAt.Before(since) && e.Origin != "import" && e.Origin != "manual" {
			recent = append(recent, e)
		}
	}
	// Newest first: each one's look finds the older copies, so a group
	// of copies is merged from the look of its newest member.
	slices.SortFunc(recent, func(a, b hindsight.Experience) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	merged := map[string]bool{}
	n := 0
	for i := range recent {
		e := &recent[i]
		if merged[e.Namespace+"\x00"+e.ID] {
			continue
		}
		_, losers, err := s.Merger.mergeCopies(ctx, e)
		if err != nil {
			return n, fmt.Errorf("sweep copies: %w", err)
		}
		for _, id := range losers {
			merged[e.Namespace+"\x00"+id] = true
		}
		n += len(losers)
	}
	s.last = start
	s.Merger.logger().Debug("reflect: swept for copies of lessons", "since", since, "looked", len(recent), "merged", n)
	return n, nil
}
