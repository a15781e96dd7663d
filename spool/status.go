package spool

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
)

// Info describes one sidecar's outbox directory.
type Info struct {
	Name       string    `json:"name"`
	Bytes      int64     `json:"bytes"`
	Live       bool      `json:"live"` // a running sidecar holds it
	ModifiedAt time.Time `json:"modified_at"`
	Stats      *Stats    `json:"stats,omitempty"` // as its sidecar last wrote them
	// Unsettled is, for a dead sidecar's outbox, the answered exchanges
	// its ledger still owes: lost, and counted (losses "crash") when the
	// outbox is drained.
	Unsettled int64 `json:"unsettled,omitempty"`
}

// Stats is what a sidecar reports of its outbox, in the stats file inside
// the outbox directory, every few seconds: so `hindsight status` shows
// depths even while the daemon is down.
type Stats struct {
	Server     string `json:"server"`
	PID        int    `json:"pid"`
	Depth      int64  `json:"depth"` // undelivered steps
	Captured   int64  `json:"captured"`
	Delivered  int64  `json:"delivered"`
	Dropped    int64  `json:"dropped"`
	Rejected   int64  `json:"rejected"`
	Redactions int64  `json:"redactions"`
	// Held is the steps held in memory because the outbox cannot be
	// written (a full disk); DroppedDiskFull those of Dropped lost so;
	// Truncated the steps stored with a body cut.
	Held            int64 `json:"held"`
	DroppedDiskFull int64 `json:"dropped_disk_full"`
	Truncated       int64 `json:"truncated"`
	// BodiesRefused counts the requests `serve` refused (503) because the
	// request bodies in flight were over its budget.
	BodiesRefused int64 `json:"bodies_refused,omitempty"`
	// ServerStarts counts the starts of the wrapped server (1 plus its
	// restarts), ServerCrashes its exits on its own, LastCrashAt the last
	// one: a crash loop shows here (stdio sidecars).
	ServerStarts  int64      `json:"server_starts,omitempty"`
	ServerCrashes int64      `json:"server_crashes,omitempty"`
	LastCrashAt   *time.Time `json:"last_crash_at,omitempty"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// WriteStats replaces the stats file of outbox id under home
// (atomically: a reader never sees half a file). An outbox directory that
// is gone (it was emptied and removed) is not recreated.
func WriteStats(home hindsight.Home, id string, st Stats) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("write outbox stats: %w", err)
	}
	dir := filepath.Join(home.Outboxes(), id)
	f, err := os.CreateTemp(dir, "."+statsName+".tmp-*")
	if err != nil {
		return fmt.Errorf("write outbox stats: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write outbox stats: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write outbox stats: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, statsName)); err != nil {
		return fmt.Errorf("write outbox stats: %w", err)
	}
	return nil
}

func readStats(dir string) *Stats {
	b, err := os.ReadFile(filepath.Join(dir, statsName))
	if err != nil {
		return nil
	}
	var st Stats
	if json.Unmarshal(b, &st) != nil {
		return nil
	}
	return &st
}

// List lists the outboxes under home. An outbox is live while its sidecar
// holds the lock on its lock file; an outbox nobody holds was left by a
// dead sidecar and waits to be drained.
func List(home hindsight.Home) []Info {
	out := []Info{}
	root := home.Outboxes()
	entries, err := os.ReadDir(root)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // being created, or set aside
		}
		p := filepath.Join(root, e.Name())
		info := Info{Name: e.Name(), Bytes: diskspace.DirSize(p), Live: locked(filepath.Join(p, lockName)), Stats: readStats(p)}
		if fi, err := e.Info(); err == nil {
			info.ModifiedAt = fi.ModTime()
		}
		if !info.Live {
			info.Unsettled, _ = LedgerUnsettled(p)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
