package spool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/tidwall/gjson"
)

// stubMembers are the members of a refused step that its stub keeps: small
// ones that say where and when it happened, none of its bodies.
var stubMembers = []string{"task_id", "session_id", "server", "started_at", "ended_at", "latency_ms", "direction",
	"method", "tool", "is_error", "error_code", "causal_tag", "local", "client_name", "client_version",
	"protocol_version", "explicit_task", "host_pid", "transport", "source", "seq"}

// stubFor returns the stub of a step the daemon refused: its small members
// (stubMembers, when they are plain JSON values) and, in "truncated", one
// entry with field "step" giving the refused encoding's size and SHA-256.
// Delivering it in the step's place keeps the source's seqs gap-free at
// the daemon, so a session's close that waits for this seq completes and
// its task can become final, and the trace shows that a step was there.
func stubFor(raw []byte) json.RawMessage {
	sum := sha256.Sum256(raw)
	b := []byte{'{'}
	for _, k := range stubMembers {
		v := gjson.GetBytes(raw, k)
		if !v.Exists() || v.IsObject() || v.IsArray() || !json.Valid([]byte(v.Raw)) {
			continue
		}
		b = strconv.AppendQuote(b, k)
		b = append(append(b, ':'), v.Raw...)
		b = append(b, ',')
	}
	b = append(b, `"truncated":[{"field":"step","original_size":`...)
	b = strconv.AppendInt(b, int64(len(raw)), 10)
	b = append(b, `,"sha256":"`...)
	b = append(b, hex.EncodeToString(sum[:])...)
	b = append(b, `"}]}`...)
	return b
}

// deliverStub delivers the stub of a refused step in its place, and
// reports whether the daemon took it.
func (o *Spool) deliverStub(ctx context.Context, e entry) bool {
	stub := entry{seq: e.seq, raw: stubFor(e.raw)}
	if err := o.send(ctx, []entry{stub}); err != nil {
		o.log.Warn("the daemon refused the stub of a refused step too; its seq stays missing", "seq", e.seq, "err", err)
		return false
	}
	return true
}

// reject moves a refused step aside (kept until retention, for inspection,
// then exported to Outboxes()/.rejected/) and delivers its stub in its
// place (see stubFor).
func (o *Spool) reject(ctx context.Context, e entry, err error) {
	o.deliverStub(ctx, e)
	o.c.rejected.Add(1)
	o.c.losses.Note(losses.Rejected, 1, err.Error())
	var s struct{ Method, Tool string }
	_ = json.Unmarshal(e.raw, &s)
	o.log.Error("daemon refused a step; set aside", "seq", e.seq, "method", s.Method, "tool", s.Tool, "err", err)
	o.wmu.Lock()
	derr := o.checkSpace(int64(len(e.raw)) + 32)
	var db *badger.DB
	if derr == nil {
		db, derr = o.disk()
	}
	if derr == nil {
		derr = db.Update(func(txn *badger.Txn) error { return txn.Set(stepKey(prefixRejected, e.seq), e.raw) })
	}
	if derr == nil {
		o.mu.Lock()
		o.keptRejected = true
		o.mu.Unlock()
	}
	o.wmu.Unlock()
	if derr != nil {
		o.log.Error("cannot keep a refused step; lost", "seq", e.seq, "err", derr)
	}
	o.remove([]entry{e})
}
