package spool

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/internal/losses"
)

// writer serialises the changes of which steps are on disk (journal
// writes, database writes and removals) with the bookkeeping of the
// queue: wmu is taken before the queue's mu.
type writer struct {
	wmu         sync.Mutex
	jr          journal       // guarded by wmu
	journalOn   atomic.Bool   // the journal works (see journal)
	wake        chan struct{} // persistLoop: a step is waiting in memory
	persistDone chan struct{} // persistLoop returned
	encBuf      []byte        // encode's scratch, guarded by wmu
	slab        []byte        // encode's slab being filled, guarded by wmu
	encOut      []encoded     // encode's result, guarded by wmu
	jrBatch     []entry       // journal's scratch, guarded by wmu
	goneSeqs    []uint64      // remove's scratch, guarded by wmu
}

// Journaling reports whether Append journals the steps it is handed
// (unless a backlog builds up) rather than writing them to disk at once or
// within PersistAfter.
func (o *Spool) Journaling() bool { return o.opts.Deliverer != nil && o.journalOn.Load() }

// Append numbers steps (setting Source and Seq) and queues them for
// delivery. A step is kept in memory until the daemon acknowledges it, and
// written to disk when that has not happened PersistAfter after its
// exchange ended (see Spool); with no Deliverer, or while the daemon is
// unreachable, Append writes before it returns. When the disk fails the
// steps are held in memory instead (the error is logged and counted); only
// steps beyond MaxHeld are lost, counted in Counts.Dropped. Append is called
// from one goroutine at a time in the Recorder, but is safe for concurrent
// use.
func (o *Spool) Append(steps []hindsight.Step) { o.append(steps, false, false) }

// AppendOwed is Append for steps whose exchanges the caller counted with
// Owe: the ledger settles each one once it is safe from a killed process
// (journaled, written to the database, delivered) or counted lost.
func (o *Spool) AppendOwed(steps []hindsight.Step) { o.append(steps, false, true) }

// AppendJournaled is Append for steps whose exchanges' answers have not
// reached the agent yet: it journals them (one write) even while the
// daemon is unreachable, and never writes to the database itself, so its
// caller, the relay, waits for one write(2) at most. Steps the journal
// cannot take (it was given up, the disk is short of space) are written to
// the database by the background writer, at once while the daemon is
// unreachable, else PersistAfter after their exchange. Call it while
// JournalRoom reports true: it does not evict steps from memory. It wakes
// neither delivery nor the background writer: call Signal after the
// answers are written. The steps the journal does not take are owed in
// the ledger (see Owe) before it returns, until they are safe.
func (o *Spool) AppendJournaled(steps []hindsight.Step) { o.append(steps, true, false) }

// JournalRoom reports whether AppendJournaled may take steps now: the
// journal works and the steps held in memory are below MaxMemBytes
// (beyond that the daemon is behind; Append's caller waits for room from
// half of it: see WaitRoom).
func (o *Spool) JournalRoom() bool {
	if !o.Journaling() {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.closed && o.memBytes < o.opts.MaxMemBytes
}

func (o *Spool) append(steps []hindsight.Step, journalFirst, owed bool) {
	if len(steps) == 0 {
		return
	}
	o.wmu.Lock()
	defer o.wmu.Unlock()
	// closed and next change only while wmu is held: the steps are
	// encoded without holding up delivery, which takes mu.
	o.mu.Lock()
	closed, next := o.closed, o.next
	o.mu.Unlock()
	if closed {
		if owed {
			o.Settle(len(steps))
		}
		o.c.losses.Lose(losses.AtExit, int64(len(steps)), "steps reached a closed outbox")
		o.log.Error("steps reached a closed outbox; lost", "steps", len(steps))
		return
	}
	encoded := o.encode(steps, next)
	o.mu.Lock()
	now := time.Now()
	// Nothing will acknowledge these steps soon: write them now.
	atOnce := o.opts.Deliverer == nil || o.lastFailed || o.writeFailing
	// Steps written to Badger at once need no journal, nor does a backlog
	// past MaxMemBytes: the Recorder's back-pressure holds capture from
	// half of it (see WaitRoom), and what passes it anyway (a batch of
	// large steps, a daemon too slow to free memory within maxRoomWait)
	// goes to Badger. Below it a step is journaled, whichever way it came,
	// so it reaches the database only when the daemon has not taken it
	// JournalPersistAfter after it was journaled. journalFirst's caller saw
	// room (JournalRoom) before others' steps took it: it journals up to
	// memLimit, not to Badger in PersistAfter.
	memRoom := o.memBytes < o.opts.MaxMemBytes || journalFirst && o.memBytes < o.memLimit()
	journaled := (!atOnce || journalFirst) && o.journalOn.Load() && memRoom
	after := o.opts.PersistAfter
	if journaled {
		after = o.opts.JournalPersistAfter
	}
	waiting := o.memDisk < len(o.mem)
	added := 0
	var minDue, maxDue time.Time
	for _, e := range encoded {
		due := now
		if !atOnce {
			// A journaled step is safe from a killed process from now
			// on: its time runs from here, not from its exchange's end,
			// or a step that waited in the capture queue's spill longer
			// than JournalPersistAfter would be written to Badger as it
			// arrives, a second time on disk.
			due = now.Add(after)
			if end := e.ended.Add(after); !journaled && !e.ended.IsZero() && end.Before(due) {
				due = end
			}
		}
		o.mem = append(o.mem, entry{seq: e.seq, raw: e.raw, due: due, owed: owed})
		o.memBytes += len(e.raw)
		o.next = e.seq + 1
		added++
		if minDue.IsZero() || due.Before(minDue) {
			minDue = due
		}
		maxDue = later(maxDue, due)
	}
	clear(encoded) // the queue holds the encodings now
	if added > 0 && (!journaled || atOnce) && o.pullDues(len(o.mem)-added, minDue) {
		// persist writes the steps held only in memory from the oldest
		// on: journaled ones before these must not hold them back, and
		// persistLoop's timer was set for them.
		waiting = false
	}
	o.maxDue = later(o.maxDue, maxDue)
	o.c.depth.Add(int64(added))
	o.mu.Unlock()
	if journaled && added > 0 {
		o.journal(now, added)
	}
	if journalFirst && added > 0 {
		o.oweUnjournaled(next)
	}
	// At once: every step held only in memory, as the older ones may not
	// be due for a while.
	if journalFirst {
		return // the caller calls Signal once the answers are out
	}
	o.persist(now, atOnce)
	o.signal(waiting)
}

// oweUnjournaled has the ledger owe the steps from seq first on that
// AppendJournaled could not journal and that are only in memory, before
// their answers are relayed. o.wmu is held.
func (o *Spool) oweUnjournaled(first uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	start := o.memDisk
	for start < len(o.mem) && o.mem[start].seq < first {
		start++
	}
	n := 0
	for _, e := range o.mem[start:] {
		if !e.journaled && !e.owed {
			n++
		}
	}
	if n == 0 {
		return
	}
	// Owed before they are marked, so a settle never runs ahead.
	o.Owe(n)
	for i := start; i < len(o.mem); i++ {
		if !o.mem[i].journaled {
			o.mem[i].owed = true
		}
	}
}

// Signal wakes delivery and the background writer for the steps that
// AppendJournaled took: call it after the answers of those steps were
// written, so that the relay does not pay for waking them first.
func (o *Spool) Signal() { o.signal(false) }

// signal wakes delivery, and the background writer unless waiting (its
// timer is set already).
func (o *Spool) signal(waiting bool) {
	if !waiting {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// journal writes the last added steps of mem to the journal. When that
// fails the journal is given up, and those steps are due on disk
// PersistAfter from now, as without one. o.wmu is held.
func (o *Spool) journal(now time.Time, added int) {
	o.mu.Lock()
	batch := append(o.jrBatch[:0], o.mem[len(o.mem)-added:]...)
	o.mu.Unlock()
	defer func() { o.jrBatch = batch[:0]; clear(batch) }()
	var size int64
	for _, e := range batch {
		size += int64(len(e.raw)) + journalHeader
	}
	err := o.journalSpace(now, size)
	if err == nil {
		err = o.jr.write(batch)
	}
	if err == nil {
		o.mu.Lock()
		first := batch[0].seq
		i := len(o.mem) - 1
		for ; i >= 0 && o.mem[i].seq >= first; i-- {
			o.mem[i].journaled = true
		}
		o.settleOwed(o.mem[i+1:])
		o.mu.Unlock()
		return
	}
	if diskspace.IsNoSpace(err) {
		// Not journaled: these steps are handled as without a journal
		// (and held in memory while the disk has no room); the journal
		// is tried again for the next ones.
		o.jr.failing = false
	} else {
		o.journalOn.Store(false)
		o.c.writeErrors.Add(1)
		o.log.Error("cannot write outbox journal; steps the daemon has not taken go to the database sooner", "err", err)
	}
	o.mu.Lock()
	o.pullDues(len(o.mem), now.Add(o.opts.PersistAfter))
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Space checks of the journal: a journal write is checked against the
// reserve once journalCheckEvery has passed or journalCheckBytes were
// written since the last check that passed, not before every write (a
// statfs costs as much as the write). A journal write fails cleanly on a
// full disk (a mapped segment's blocks are written when it is created);
// the reserve is kept for Badger, and the little written between checks
// leaves it almost whole.
const (
	journalCheckEvery = 50 * time.Millisecond
	journalCheckBytes = 1 << 20
)

// journalSpace is checkSpace for a journal write of size bytes at now,
// skipped while the last check that passed is recent enough. o.wmu is
// held.
func (o *Spool) journalSpace(now time.Time, size int64) error {
	j := &o.jr
	if j.checkedSince+size < journalCheckBytes && now.Sub(j.checkedAt) < journalCheckEvery {
		j.checkedSince += size
		return nil
	}
	if err := o.checkSpace(size); err != nil {
		j.checkedAt = time.Time{}
		return err
	}
	j.checkedAt, j.checkedSince = now, size
	return nil
}

// releaseJournal removes the journal segments whose steps have all left
// memory. o.wmu is held.
func (o *Spool) releaseJournal() {
	o.mu.Lock()
	first := o.next
	if o.memDisk < len(o.mem) {
		first = o.mem[o.memDisk].seq
	}
	o.mu.Unlock()
	o.jr.release(first)
}

// persist writes to disk the steps held only in memory that are due by
// now (all of them when all is set) and those that must leave memory
// because it holds more than MaxMemBytes, then lets the latter go. When
// the write fails they stay in memory, up to MaxHeld. o.wmu is held.
func (o *Spool) persist(now time.Time, all bool) {
	o.mu.Lock()
	k := o.memDisk
	for k < len(o.mem) && (all || !o.mem[k].due.After(now)) {
		k++
	}
	over, bytes, limit := 0, o.memBytes, o.memLimit()
	for bytes > limit && over < len(o.mem) {
		bytes -= len(o.mem[over].raw)
		over++
	}
	k = max(k, over)
	batch := o.mem[o.memDisk:k]
	o.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	err := o.write(batch)
	defer o.releaseJournal() // after mu is unlocked
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		if o.writeFailing {
			o.log.Info("outbox writable again")
		}
		o.writeFailing = false
		o.settleOwed(o.mem[o.memDisk:k])
		o.memDisk = k
		o.dirty = true
		o.lastWrite = now
		select {
		case o.syncWake <- struct{}{}:
		default:
		}
		o.c.spilled.Add(int64(len(batch)))
		o.c.held.Store(0)
		o.c.heldBytes.Store(0)
		o.trimMem()
		return
	}
	if !diskspace.IsNoSpace(err) {
		o.c.writeErrors.Add(1)
	}
	was := o.writeFailing
	o.writeFailing = true
	o.freed()
	// Keep the oldest steps (the closest to being delivered) within
	// MaxHeld and MaxHeldBytes; the newest go.
	keep, heldBytes := o.memDisk, 0
	for keep < len(o.mem) && keep-o.memDisk < o.opts.MaxHeld && heldBytes+len(o.mem[keep].raw) <= o.opts.MaxHeldBytes {
		heldBytes += len(o.mem[keep].raw)
		keep++
	}
	lost := len(o.mem) - keep
	if lost > 0 {
		o.settleOwed(o.mem[keep:]) // counted below
		for _, e := range o.mem[keep:] {
			o.memBytes -= len(e.raw)
		}
		clear(o.mem[keep:])
		o.mem = o.mem[:keep]
		reason := losses.WriteError
		if diskspace.IsNoSpace(err) {
			reason = losses.DiskFull
		}
		o.c.losses.Lose(reason, int64(lost), err.Error())
		o.c.depth.Add(-int64(lost))
	}
	o.c.held.Store(int64(len(o.mem) - o.memDisk))
	o.c.heldBytes.Store(int64(heldBytes))
	now2 := time.Now()
	if !was || (lost > 0 && now2.Sub(o.lastDropLog) > 10*time.Second) {
		o.lastDropLog = now2
		o.log.Error("cannot write outbox; holding steps in memory", "err", err, "held", len(o.mem)-o.memDisk,
			"max_held", o.opts.MaxHeld, "max_held_bytes", o.opts.MaxHeldBytes, "dropped", lost, "dropped_total", o.c.losses.Lost())
	}
}

// memLimit is the size of the steps held in memory past which persist
// writes the oldest to the database to let them go. The journal admits
// steps while memory holds less than MaxMemBytes, and concurrent callers
// (Record's relays, the committer's batch) can each pass that check before
// the others' steps land: while the journal works and the daemon answers,
// that overshoot (a quarter of MaxMemBytes at most, else the rest goes) is
// kept in memory, journaled, rather than written to Badger a second time.
// q.mu is held.
func (o *Spool) memLimit() int {
	if o.journalOn.Load() && !o.lastFailed && !o.writeFailing {
		return o.opts.MaxMemBytes + o.opts.MaxMemBytes/4
	}
	return o.opts.MaxMemBytes
}

// persistLoop writes steps held only in memory to disk when they are due.
// While the database is not open yet, it opens it openLead before the
// first such deadline, so that the write still makes it.
func (o *Spool) persistLoop() {
	defer close(o.persistDone)
	t := time.NewTimer(time.Hour)
	t.Stop()
	tried := false // to open the database ahead of a deadline, and failed
	for {
		o.mu.Lock()
		var due time.Time
		if o.memDisk < len(o.mem) {
			due = o.mem[o.memDisk].due
		}
		failing := o.writeFailing
		o.mu.Unlock()
		if o.db.Load() != nil {
			tried = false // closeIdleDisk may close it again
		}
		opening := false
		if !due.IsZero() {
			d := time.Until(due)
			if opening = o.db.Load() == nil && !tried && !failing; opening {
				d -= openLead
			}
			if failing {
				d = max(d, time.Second) // retry a failing disk at a gentle pace
			}
			t.Reset(d)
		}
		select {
		case <-o.stopSync:
			t.Stop()
			return
		case <-o.wake:
			t.Stop()
		case <-t.C:
			if opening {
				_, err := o.disk()
				tried = err != nil // a failure is the write's to report
				continue
			}
			o.wmu.Lock()
			o.persist(time.Now(), false)
			o.wmu.Unlock()
		}
	}
}

// openLead is how long before a step must be on disk the outbox opens its
// database, when it is not open yet: opening takes 5–15 ms, more on a
// loaded machine, and the write must still land within PersistAfter.
const openLead = 15 * time.Millisecond
