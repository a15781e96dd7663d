package spool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
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
	o.c.ledger.Load().Add(losses.Rejected, 1, err.Error())
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

// exportRejected writes the steps the daemon refused to
// Outboxes()/.rejected/<id>.jsonl (they are redacted already), so an
// outbox can be removed without losing them silently.
func (o *Spool) exportRejected() error {
	var lines []byte
	_ = o.db.Load().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixRejected}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			_ = it.Item().Value(func(v []byte) error {
				lines = append(appendLine(lines, v), '\n')
				return nil
			})
		}
		return nil
	})
	if len(lines) == 0 {
		return nil
	}
	dir := filepath.Join(filepath.Dir(o.dir), ".rejected")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("export rejected steps: %w", err)
	}
	path := filepath.Join(dir, o.id+".jsonl")
	if err := os.WriteFile(path, lines, 0o600); err != nil {
		return fmt.Errorf("export rejected steps: %w", err)
	}
	o.log.Warn("steps the daemon refused were kept in a file", "path", path)
	return nil
}

// appendLine appends a stored step as one line of JSON: whole (a step's
// compact encoding gets its derived bodies back) and compacted, since
// Step.AppendJSON keeps the bodies' whitespace (newlines included); an
// object encoding/json cannot read as it is, without its newlines; or as a
// JSON string when it is not JSON at all.
func appendLine(lines, v []byte) []byte {
	var s hindsight.Step
	if hindsight.UnmarshalCompactJSON(v, &s) == nil {
		if full, err := s.AppendJSON(nil); err == nil {
			v = full
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) == nil {
		return append(lines, buf.Bytes()...)
	}
	if len(v) > 1 && v[0] == '{' && v[len(v)-1] == '}' {
		// An object encoding/json cannot read (nested past its depth
		// limit, say): kept as it is, on one line. Raw newlines in JSON
		// are whitespace between tokens (in strings they are escaped).
		for _, c := range v {
			if c != '\n' && c != '\r' {
				lines = append(lines, c)
			}
		}
		return lines
	}
	q, _ := json.Marshal(string(v))
	return append(lines, q...)
}
