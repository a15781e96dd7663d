package capture

import (
	"log/slog"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight/internal/losses"
)

// logEvery spaces the warnings that repeat while capture is behind.
const logEvery = 10 * time.Second

// drops counts the exchanges lost before they reached the queue or the
// spill and logs them, at most once every logEvery.
type drops struct {
	c      *counters
	log    *slog.Logger
	logged throttle
}

// drop counts an exchange lost because capture's queue was full (or
// capture closing).
func (d *drops) drop(why string) { d.dropFor(losses.QueueFull, why, 1) }

// dropFor is drop for n exchanges, with the reason recorded in the loss
// ledger.
func (d *drops) dropFor(reason, why string, n int64) {
	d.c.losses.Lose(reason, n, why)
	total := d.c.losses.Lost()
	if d.logged.due(logEvery) {
		d.log.Warn("exchange not recorded", "reason", why, "dropped_total", total,
			"queued", d.c.queued.Load(), "queued_bytes", d.c.queuedBytes.Load())
	}
}

// A throttle lets an event through at most once a period.
type throttle struct {
	mu   sync.Mutex // guards last
	last time.Time
}

// due reports whether more than every passed since it last said so.
func (t *throttle) due(every time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.last) > every {
		t.last = time.Now()
		return true
	}
	return false
}

// ledgerInterval spaces the writes of the loss ledger.
const ledgerInterval = time.Second

// A ledgerFlusher writes the loss ledger every ledgerInterval while it
// changed, until stopped.
type ledgerFlusher struct {
	stop chan struct{} // closed by close
	done chan struct{} // closed when the flushing goroutine returns
}

func startLedgerFlush(c *counters, log *slog.Logger) *ledgerFlusher {
	f := &ledgerFlusher{stop: make(chan struct{}), done: make(chan struct{})}
	go f.run(c, log)
	return f
}

func (f *ledgerFlusher) run(c *counters, log *slog.Logger) {
	defer close(f.done)
	t := time.NewTicker(ledgerInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			if err := c.losses.Ledger().Flush(); err != nil {
				log.Warn("record lost steps", "err", err)
			}
		}
	}
}

// close stops the flushing and waits for it.
func (f *ledgerFlusher) close() {
	close(f.stop)
	<-f.done
}
