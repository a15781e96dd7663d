// Package losses keeps the durable record of the steps a sidecar could not
// store whole: one small JSON file per sidecar (per outbox id) under
// $HINDSIGHT_HOME/losses/, which outlives the sidecar and its outbox, so
// that `hindsight status` can say what was lost, per server, why and when,
// whether or not the daemon runs.
//
// A ledger file is created at its full size (fileSize, with its blocks
// allocated) when the sidecar starts, and rewritten in place: updating it
// needs no new block, so losses are still recorded while the disk is full,
// which is when they happen.
package losses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Reasons a step is lost or cut.
const (
	DiskFull   = "disk-full"   // held in memory while the disk was short, past the bound
	WriteError = "write-error" // the outbox could not be written (not for lack of space), past the bound
	QueueFull  = "queue-full"  // capture's queue and spill were full, or capture was closing
	Rejected   = "rejected"    // the daemon refused the step (set aside in outbox/.rejected/ when it could be)
	Expired    = "expired"     // undelivered past the retention period
	AtExit     = "at-exit"     // the sidecar stopped with the step only in memory
	Crash      = "crash"       // spilled before redaction, or torn in its journal, by a sidecar that died (found by a drainer)
	Encode     = "encode"      // the step could not be encoded
	Truncated  = "truncated"   // stored with bodies cut (not lost: counted apart)
)

// Dir is the directory of ledgers in a Hindsight home.
func Dir(home string) string { return filepath.Join(home, "losses") }

// Record is one sidecar's ledger.
type Record struct {
	Source string `json:"source"` // the outbox id
	Server string `json:"server"`
	PID    int    `json:"pid,omitempty"`
	// Counts holds steps per reason (Truncated included).
	Counts     map[string]int64 `json:"counts"`
	LastReason string           `json:"last_reason,omitempty"`
	LastAt     time.Time        `json:"last_at,omitzero"`
	LastDetail string           `json:"last_detail,omitempty"`
}

// Lost returns the steps lost: every count but Truncated.
func (r *Record) Lost() int64 {
	var n int64
	for k, v := range r.Counts {
		if k != Truncated {
			n += v
		}
	}
	return n
}

// fileSize is the size a ledger file is created with.
const fileSize = 4096

// A Ledger is a sidecar's ledger, kept in memory and written to its file
// by Flush. It is safe for concurrent use.
type Ledger struct {
	path string

	mu    sync.Mutex
	f     *os.File
	rec   Record
	dirty bool
	size  int64
}

// Open creates the ledger of source (a sidecar's outbox id) for server,
// with its file's blocks allocated.
func Open(home, source, server string) (*Ledger, error) {
	dir := Dir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create loss ledger: %w", err)
	}
	l := &Ledger{path: filepath.Join(dir, source+".json"),
		rec: Record{Source: source, Server: server, PID: os.Getpid(), Counts: map[string]int64{}}}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create loss ledger: %w", err)
	}
	if err := preallocate(f, fileSize); err != nil {
		f.Close()
		os.Remove(l.path)
		return nil, fmt.Errorf("allocate loss ledger: %w", err)
	}
	l.f, l.size = f, fileSize
	l.dirty = true
	if err := l.Flush(); err != nil {
		l.Close(true)
		return nil, err
	}
	return l, nil
}

// Path is the ledger's file.
func (l *Ledger) Path() string { return l.path }

// Add records n steps lost (or cut) for reason; detail says more (an error).
func (l *Ledger) Add(reason string, n int64, detail string) {
	if l == nil || n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec.Counts[reason] += n
	l.rec.LastReason, l.rec.LastAt, l.rec.LastDetail = reason, time.Now().UTC(), clip(detail, 300)
	l.dirty = true
}

// Snapshot returns a copy of the record.
func (l *Ledger) Snapshot() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rec
	r.Counts = make(map[string]int64, len(l.rec.Counts))
	for k, v := range l.rec.Counts {
		r.Counts[k] = v
	}
	return r
}

// Flush writes the ledger to its file when it changed, in place (padded
// with spaces to the file's size, so no new block is needed).
func (l *Ledger) Flush() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.dirty || l.f == nil {
		return nil
	}
	b, err := json.Marshal(l.rec)
	if err != nil {
		return fmt.Errorf("encode loss ledger: %w", err)
	}
	if int64(len(b))+1 > l.size {
		l.size = int64(len(b)) + 1
	}
	buf := bytes.Repeat([]byte{' '}, int(l.size))
	copy(buf, b)
	buf[len(buf)-1] = '\n'
	if _, err := l.f.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("write loss ledger: %w", err)
	}
	l.dirty = false
	return nil
}

// Close flushes the ledger and closes its file; with removeIfClean, a
// ledger that recorded nothing is removed.
func (l *Ledger) Close(removeIfClean bool) error {
	if l == nil {
		return nil
	}
	err := l.Flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	if removeIfClean && len(l.rec.Counts) == 0 {
		_ = os.Remove(l.path)
	}
	return err
}

// AddTo adds n steps lost for reason to the ledger of source (a dead
// sidecar's, from a drainer), creating it when it does not exist.
func AddTo(home, source, server, reason string, n int64, detail string) error {
	if n <= 0 {
		return nil
	}
	path := filepath.Join(Dir(home), source+".json")
	rec := Record{Source: source, Server: server, Counts: map[string]int64{}}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(bytes.TrimSpace(b), &rec)
		if rec.Counts == nil {
			rec.Counts = map[string]int64{}
		}
	}
	rec.Counts[reason] += n
	rec.LastReason, rec.LastAt, rec.LastDetail = reason, time.Now().UTC(), clip(detail, 300)
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode loss ledger: %w", err)
	}
	if err := os.MkdirAll(Dir(home), 0o700); err != nil {
		return fmt.Errorf("write loss ledger: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write loss ledger: %w", err)
	}
	return nil
}

// Remove deletes the ledger of source when it records nothing (a dead
// sidecar's, once drained).
func Remove(home, source string) {
	path := filepath.Join(Dir(home), source+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var rec Record
	if json.Unmarshal(bytes.TrimSpace(b), &rec) == nil && len(rec.Counts) == 0 {
		_ = os.Remove(path)
	}
}

// ServerLosses sums the ledgers of one server.
type ServerLosses struct {
	Server    string           `json:"server"`
	Lost      int64            `json:"lost"`      // steps lost, every reason but truncated
	Truncated int64            `json:"truncated"` // steps stored with bodies cut
	Reasons   map[string]int64 `json:"reasons"`   // steps per reason
	// LastReason and LastAt are those of the most recent loss (or cut).
	LastReason string    `json:"last_reason,omitempty"`
	LastAt     time.Time `json:"last_at,omitzero"`
	LastDetail string    `json:"last_detail,omitempty"`
	Sidecars   int       `json:"sidecars"` // ledgers summed
}

// Scan reads every ledger under home and sums them per server, servers in
// name order; ledgers that record nothing are skipped.
func Scan(home string) []ServerLosses {
	out := []ServerLosses{}
	ents, err := os.ReadDir(Dir(home))
	if err != nil {
		return out
	}
	by := map[string]*ServerLosses{}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(Dir(home), e.Name()))
		if err != nil {
			continue
		}
		var rec Record
		if json.Unmarshal(bytes.TrimSpace(b), &rec) != nil || len(rec.Counts) == 0 {
			continue
		}
		s := by[rec.Server]
		if s == nil {
			s = &ServerLosses{Server: rec.Server, Reasons: map[string]int64{}}
			by[rec.Server] = s
		}
		s.Sidecars++
		for k, v := range rec.Counts {
			s.Reasons[k] += v
			if k == Truncated {
				s.Truncated += v
			} else {
				s.Lost += v
			}
		}
		if rec.LastAt.After(s.LastAt) {
			s.LastReason, s.LastAt, s.LastDetail = rec.LastReason, rec.LastAt, rec.LastDetail
		}
	}
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
