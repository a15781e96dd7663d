package proxy

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/hindsight-proxy/hindsight/wire"
)

// JSON-RPC batches (MCP 2025-03-26; later protocol versions refuse them)
// are relayed as they came, never split or rewritten, but each message in
// them is taken note of as if it came alone: every call of a batch is
// recorded as a step of its own. The exchanges a batch completes go to
// Hooks.Record together before the batch is relayed, then to
// Hooks.Exchange.

// eachInBatch calls fn with each message of the batch raw, which Parse
// found to be a JSON array; elements that are no JSON-RPC message are
// skipped (the peer answers them, or not, as it sees fit).
func eachInBatch(raw []byte, fn func(m *Message)) {
	i := wire.SkipSpace(raw, 0)
	inner := bytes.TrimSpace(raw[i+1 : len(raw)-1])
	if len(inner) == 0 {
		return
	}
	wire.EachValue(inner, func(el []byte) error {
		if m, err := Parse(el); err == nil && m.Kind != KindBatch {
			fn(&m)
		}
		return nil
	})
}

// clientBatch takes note of the messages of the agent's batch raw and
// returns the ids of the requests it put in flight. Requests the sidecar
// would answer itself are forwarded like the others (the batch is relayed
// whole); a request whose id is already in flight is not tracked again.
func (c *Conn) clientBatch(raw []byte, now time.Time) []json.RawMessage {
	var ids []json.RawMessage
	var done []*Exchange
	defer c.recordAll(&done)
	eachInBatch(raw, func(m *Message) {
		switch m.Kind {
		case KindRequest:
			if ex := c.clientRequest(m, now); c.putInFlight(ex, m) {
				ids = append(ids, m.ID)
			}
		case KindNotification:
			c.clientNotification(m)
		case KindResponse:
			if _, ex := c.complete(&c.fromServer, m, now); ex != nil {
				done = append(done, ex)
			}
		}
	})
	return ids
}

// serverBatch takes note of the messages of the server's batch raw: the
// responses in it complete the agent's requests (their exchanges are
// emitted at once, unrewritten: the batch is relayed as it came), its
// requests are tracked until the agent answers them.
func (c *Conn) serverBatch(raw []byte, now time.Time) {
	var done []*Exchange
	defer c.recordAll(&done)
	eachInBatch(raw, func(m *Message) {
		switch m.Kind {
		case KindResponse:
			if ex := c.take(&c.fromClient, string(m.ID)); ex != nil {
				ex.Response, ex.Ended = m.Raw, now
				done = append(done, ex)
			}
		case KindRequest:
			c.serverRequest(m, now)
		case KindNotification:
			c.serverNotification(m)
		}
	})
}

// recordAll hands the exchanges *done to Hooks.Record, then each to
// Hooks.Exchange: the answers of a batch, before it is relayed.
func (c *Conn) recordAll(done *[]*Exchange) {
	c.record(*done)
	for _, ex := range *done {
		c.emit(ex)
	}
}
