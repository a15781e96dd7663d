package spool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/wire"
)

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
	dir := filepath.Join(filepath.Dir(o.dir), rejectedDir)
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
// wire.AppendStep keeps the bodies' whitespace (newlines included); an
// object encoding/json cannot read as it is, without its newlines; or as a
// JSON string when it is not JSON at all.
func appendLine(lines, v []byte) []byte {
	var s hindsight.Step
	if wire.UnmarshalCompact(v, &s) == nil {
		if full, err := wire.AppendStep(nil, &s); err == nil {
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
