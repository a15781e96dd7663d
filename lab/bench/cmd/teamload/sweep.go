//go:build linux

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/reflect"
)

// sweeps are the members' dedupe sweeps, each run as the daemon runs it
// (reflect.Sweeper.Run) every -sweep, the first looking back a minute
// (the bulk-loaded lessons are older and copy-free).
type sweeps struct {
	sweepers []*reflect.Sweeper
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	merged   int
}

func startSweeps(ctx context.Context, members []*member, o *options, emb hindsight.Embedder) *sweeps {
	sw := &sweeps{}
	if o.sweep <= 0 {
		sw.cancel = func() {}
		return sw
	}
	sctx, cancel := context.WithCancel(ctx)
	sw.cancel = cancel
	for _, m := range members {
		s := &reflect.Sweeper{Merger: m.merger(hindsight.DefaultNamespace, emb), Interval: o.sweep,
			Margin: min(o.sweep, reflect.DefaultSweepMargin), Lookback: time.Minute,
			Report: func(n int) { sw.mu.Lock(); sw.merged += n; sw.mu.Unlock() }}
		sw.sweepers = append(sw.sweepers, s)
		sw.wg.Add(1)
		go func() {
			defer sw.wg.Done()
			s.Run(sctx)
		}()
	}
	return sw
}

// finish stops the periodic sweeps, then has each member sweep once more
// (as each daemon's next sweep would, the cluster whole again) and
// returns how many copies the sweeps merged.
func (sw *sweeps) finish(ctx context.Context) (int, error) {
	sw.cancel()
	sw.wg.Wait()
	for i, s := range sw.sweepers {
		n, err := s.Sweep(ctx)
		if err != nil {
			return sw.merged, fmt.Errorf("last sweep of daemon %d: %w", i, err)
		}
		sw.merged += n
	}
	return sw.merged, nil
}
