package proxy

import (
	"bytes"
	"fmt"
	"time"

	"github.com/tidwall/sjson"
)

// install makes ch the current child. When the agent already initialized a
// session, its handshake is replayed first and the agent's traffic held
// until the child answered.
func (r *relay) install(ch *child) {
	initReq, initialized := r.conn.Handshake()
	rt := &r.route
	rt.mu.Lock()
	rt.cur, rt.ready = ch, false
	if initReq == nil {
		rt.mu.Unlock()
		r.becomeReady(ch, nil)
		return
	}
	rt.seq++
	id := []byte(fmt.Sprintf(`"hindsight-replay-%d"`, rt.seq))
	replayed, err := sjson.SetRawBytes(initReq, "id", id)
	if err != nil {
		rt.mu.Unlock()
		r.log.Error("replay initialize", "server", r.name, "err", err)
		r.becomeReady(ch, initialized)
		return
	}
	rt.replayID = id
	rt.replay.Store(true)
	rt.mu.Unlock()
	r.log.Debug("replaying the agent's initialize to the restarted server", "server", r.name)
	if err := ch.in.WriteMessage(replayed); err != nil {
		r.log.Debug("write to server failed", "server", r.name, "err", err)
	}
	wait := r.s.ReplayTimeout
	if wait <= 0 {
		wait = DefaultReplayTimeout
	}
	time.AfterFunc(wait, func() {
		rt.mu.Lock()
		late := rt.cur == ch && !rt.ready
		rt.mu.Unlock()
		if late {
			r.log.Warn("restarted server did not answer the replayed initialize; delivering anyway", "server", r.name)
			r.becomeReady(ch, initialized)
		}
	})
}

// becomeReady sends the initialized notification (if any) and the held
// messages to ch, then lets the agent's traffic through. Holding the
// route's lock while writing keeps the order: later messages wait behind
// the held ones.
func (r *relay) becomeReady(ch *child, initialized []byte) {
	rt := &r.route
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.cur != ch || rt.ready {
		return
	}
	rt.replay.Store(false)
	rt.replayID = nil
	var err error
	if initialized != nil {
		err = ch.in.WriteMessage(initialized)
	}
	for _, m := range rt.held {
		if err == nil {
			err = ch.in.WriteMessage(m)
		}
	}
	rt.held = nil
	rt.ready = true
	if err != nil {
		r.log.Debug("write to server failed", "server", r.name, "err", err)
	}
}

// isReplayAnswer reports whether line answers the replayed initialize.
func (r *relay) isReplayAnswer(line []byte) bool {
	r.route.mu.Lock()
	id := r.route.replayID
	r.route.mu.Unlock()
	if id == nil || !bytes.Contains(line, id) {
		return false
	}
	m, err := Parse(line)
	return err == nil && m.Kind == KindResponse && bytes.Equal(m.ID, id)
}
