package spool

import "time"

// maxRoomWait bounds one WaitRoom: a daemon that takes batches but too
// slowly to free memory within it gets the rest written to the database,
// as before back-pressure, rather than stall capture for good.
const maxRoomWait = 2 * time.Second

// WaitRoom blocks while the steps the outbox holds in memory exceed half
// of MaxMemBytes and the daemon is taking them, until deliveries free
// memory or maxRoomWait passes. The Recorder's committer
// calls it before each Append, so that a flood the daemon cannot keep up
// with backs up into the capture queue, which is bounded and spills to
// disk sealed, instead of growing the outbox or being written to its
// database step by step. It returns at once when nothing will free memory
// soon: no Deliverer, a failing delivery or disk, a closed outbox.
func (o *Spool) WaitRoom() {
	var timeout <-chan time.Time
	for {
		o.mu.Lock()
		full := o.crowded()
		if o.room == nil {
			o.room = make(chan struct{})
		}
		room := o.room
		o.mu.Unlock()
		if !full {
			return
		}
		if timeout == nil {
			t := time.NewTimer(maxRoomWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-room:
		case <-timeout:
			return
		}
	}
}

// Crowded reports whether WaitRoom would wait now.
func (o *Spool) Crowded() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.crowded()
}

// crowded is Crowded with o.mu held.
func (o *Spool) crowded() bool {
	return o.memBytes > o.opts.MaxMemBytes/2 && o.opts.Deliverer != nil &&
		!o.lastFailed && !o.writeFailing && !o.closed
}

// freed wakes WaitRoom after steps left memory. q.mu is held.
func (q *queue) freed() {
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
}
