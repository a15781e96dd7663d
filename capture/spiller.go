package capture

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/spool"
)

// A spiller takes the exchanges that find the queue full: its writer
// goroutine seals them into the spill (see spill), its reader goroutine
// reads them back, in order, and queues them as the queue frees up. From
// the first exchange that found the queue full until the spill is read
// back, every exchange takes that path, so the order is kept.
//
// It has more than twenty fields because both goroutines and Hook share
// the path's state; what each guards is said beside it.
type spiller struct {
	q         *intake
	drops     *drops
	c         *counters
	log       *slog.Logger
	processed *atomic.Int64 // the Recorder's: exchanges committed or lost
	// progressed is the committer's: a channel closed at its next commit.
	progressed func() <-chan struct{}
	dir        string // the spill's directory, made at the first spill
	max        int64  // Options.MaxSpillBytes
	// ledger settles the owed exchanges once written (a drainer counts
	// what a dead sidecar's spill holds) or lost, and owes them again as
	// they are read back; nil: no ledger.
	ledger *spool.Spool

	mu       sync.Mutex  // orders Hook's choice of path with the reader's end of a spill; guards pending
	spilling atomic.Bool // exchanges go to the spill, not the queue
	pending  int64       // exchanges on the spill path, not yet queued or lost

	in      chan *proxy.Exchange  // Hook → writer, at most spillQueue; closed by closeIntake
	inBytes atomic.Int64          // the size of the exchanges in in
	more    chan struct{}         // capacity 1: the writer wrote a record
	sp      atomic.Pointer[spill] // opened by the writer at the first spill
	once    sync.Once             // opens sp
	openErr error                 // why sp could not be opened; the writer's

	writerDone chan struct{} // closed when the writer returns
	readerDone chan struct{} // closed when the reader returns
	stopRead   chan struct{} // closed by wait when its ctx ends: the reader gives up
	logged     throttle      // the "capture is behind" warning
}

func newSpiller(q *intake, d *drops, processed *atomic.Int64, progressed func() <-chan struct{}, dir string, max int64) *spiller {
	return &spiller{q: q, drops: d, c: d.c, log: d.log, processed: processed, progressed: progressed,
		dir: dir, max: max, in: make(chan *proxy.Exchange, spillQueue), more: make(chan struct{}, 1),
		writerDone: make(chan struct{}), readerDone: make(chan struct{}), stopRead: make(chan struct{})}
}

// start runs the writer and the reader.
func (s *spiller) start() {
	go s.write()
	go s.read()
}

// active reports whether exchanges take the spill path now.
func (s *spiller) active() bool { return s.spilling.Load() }

// take is Hook's path when the queue was full or the spill active: it
// queues ex if the spill is not active and the queue has room now, or
// hands it to the writer, or drops it when the writer is too far behind.
// It reports whether ex was queued or spilled.
func (s *spiller) take(ex *proxy.Exchange, size int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.spilling.Load() {
		if s.q.tryQueue(ex, size) {
			return true
		}
		s.spilling.Store(true)
	}
	if s.inBytes.Add(size) > spillQueueBytes && len(s.in) > 0 {
		s.inBytes.Add(-size)
		s.drops.drop("capture queue full and spill writer behind")
		return false
	}
	select {
	case s.in <- ex:
		s.pending++
		return true
	default:
		s.inBytes.Add(-size)
		s.drops.drop("capture queue full and spill writer behind")
		return false
	}
}

// closeIntake says Hook sends no more: the writer ends once it wrote the
// rest, and the reader once it read the spill back.
func (s *spiller) closeIntake() { close(s.in) }

// wait waits for the reader to queue what is spilled, or for ctx; then it
// stops the reader, which counts what is left as lost.
func (s *spiller) wait(ctx context.Context) {
	select {
	case <-s.readerDone:
	case <-ctx.Done():
		close(s.stopRead)
		<-s.readerDone
	}
}

// write seals the exchanges Hook sends to the spill and appends them,
// writing what it gathered once it has caught up with Hook (or gathered
// spillFlushBytes): one write for a burst.
func (s *spiller) write() {
	defer close(s.writerDone)
	for ex := range s.in {
		s.inBytes.Add(-exchangeSize(ex))
		s.once.Do(func() {
			var sp *spill
			sp, s.openErr = openSpill(s.dir, s.max, s.more, s.log, s.c)
			s.sp.Store(sp)
		})
		sp := s.sp.Load()
		if s.openErr != nil {
			s.failed(1, s.openErr)
			continue
		}
		written, lost, err := sp.put(ex)
		s.spilled(written, lost, err)
		if len(s.in) == 0 || sp.buffered() >= spillFlushBytes {
			s.spilled(sp.flush())
		}
	}
}

// spilled counts what a put or flush of the spill wrote, and what it lost.
func (s *spiller) spilled(written, lost int, err error) {
	if written > 0 {
		s.ledger.Settle(written)
		s.noteSpilled(written)
	}
	if err != nil {
		s.failed(lost, err)
	}
}

// failed counts n exchanges lost on their way to the spill.
func (s *spiller) failed(n int, err error) {
	reason := losses.QueueFull
	if diskspace.IsNoSpace(err) {
		reason = losses.DiskFull
	}
	s.drops.dropFor(reason, "capture queue full; cannot spill: "+err.Error(), int64(n))
	s.ledger.Settle(n)
	s.processed.Add(int64(n))
	s.gone(int64(n))
}

// noteSpilled counts n exchanges written to the spill and says so in the
// log at most every logEvery.
func (s *spiller) noteSpilled(n int) {
	total := s.c.spilledEx.Add(int64(n))
	if s.logged.due(logEvery) {
		s.log.Warn("capture is behind: exchanges spill to disk, sealed with a key held only in memory, and are recorded as capture catches up",
			"spilled_total", total, "unspilled_total", s.c.unspilledEx.Load(), "spill_bytes", s.c.spillBytes.Load())
	}
}

// gone ends n exchanges' time on the spill path: queued or lost.
func (s *spiller) gone(n int64) {
	s.mu.Lock()
	s.pending -= n
	if s.pending == 0 {
		s.spilling.Store(false)
	}
	s.mu.Unlock()
}

// read reads spilled exchanges back, in order, and queues them as the
// queue has room, until the writer is done and the spill empty.
func (s *spiller) read() {
	defer close(s.readerDone)
	defer func() {
		if sp := s.sp.Load(); sp != nil {
			if n := sp.close(); n > 0 {
				s.c.losses.Lose(losses.AtExit, int64(n), "capture closed before its spill was recorded")
				s.processed.Add(int64(n))
				s.log.Error("capture closed before its spill was recorded; exchanges lost", "exchanges", n)
			}
		}
	}()
	writerDone := s.writerDone
	for {
		var ex *proxy.Exchange
		var ok bool
		var err error
		sp := s.sp.Load()
		if sp != nil {
			ex, ok, err = sp.next()
		}
		if !ok {
			if writerDone == nil && (sp == nil || sp.pending() == 0) {
				return
			}
			select {
			case <-s.more:
			case <-writerDone:
				writerDone = nil // it wrote its last; see what is left
			case <-s.stopRead:
				<-s.writerDone
				return
			}
			continue
		}
		if err != nil {
			s.c.spillLost.Add(1)
			s.c.losses.Lose(losses.QueueFull, 1, "spilled exchange unreadable: "+err.Error())
			s.processed.Add(1)
			s.log.Error("spilled exchange unreadable; lost", "err", err)
			s.gone(1)
			continue
		}
		if !s.requeue(ex) {
			s.c.losses.Lose(losses.AtExit, 1, "capture closed before its spill was recorded")
			s.processed.Add(1)
			s.gone(1)
			<-s.writerDone
			return
		}
		s.c.unspilledEx.Add(1)
		s.gone(1)
	}
}

// requeue puts a spilled exchange on the queue once it has room; false
// when the Recorder is closing and gave up waiting.
func (s *spiller) requeue(ex *proxy.Exchange) bool {
	size := exchangeSize(ex)
	for {
		progress := s.progressed()
		if s.q.roomFor(size) {
			break
		}
		select {
		case <-progress:
		case <-s.stopRead:
			return false
		}
	}
	s.ledger.Owe(1) // off the spill: on the queue until its step is safe
	ex.Owed = true
	s.q.admit(ex, size)
	return true
}
