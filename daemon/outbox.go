package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/internal/filelock"
)

// OutboxInfo describes one sidecar's outbox directory.
type OutboxInfo struct {
	Name       string       `json:"name"`
	Bytes      int64        `json:"bytes"`
	Live       bool         `json:"live"` // a running sidecar holds it
	ModifiedAt time.Time    `json:"modified_at"`
	Stats      *OutboxStats `json:"stats,omitempty"` // as its sidecar last wrote them
}

// OutboxStats is what a sidecar reports of its outbox, in OutboxStatsFile
// inside the outbox directory, every few seconds: so `hindsight status`
// shows depths even while the daemon is down.
type OutboxStats struct {
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
	// ServerStarts counts the starts of the wrapped server (1 plus its
	// restarts), ServerCrashes its exits on its own, LastCrashAt the last
	// one: a crash loop shows here (stdio sidecars).
	ServerStarts  int64      `json:"server_starts,omitempty"`
	ServerCrashes int64      `json:"server_crashes,omitempty"`
	LastCrashAt   *time.Time `json:"last_crash_at,omitempty"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// OutboxStatsFile is the file of OutboxStats in an outbox directory.
const OutboxStatsFile = "stats.json"

// WriteOutboxStats replaces the stats file in the outbox directory dir
// (atomically: a reader never sees half a file). A directory that is gone
// (its outbox was emptied and removed) is not recreated.
func WriteOutboxStats(dir string, st OutboxStats) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+OutboxStatsFile+".tmp-*")
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
	if err := os.Rename(f.Name(), filepath.Join(dir, OutboxStatsFile)); err != nil {
		return fmt.Errorf("write outbox stats: %w", err)
	}
	return nil
}

func readOutboxStats(dir string) *OutboxStats {
	b, err := os.ReadFile(filepath.Join(dir, OutboxStatsFile))
	if err != nil {
		return nil
	}
	var st OutboxStats
	if json.Unmarshal(b, &st) != nil {
		return nil
	}
	return &st
}

// OutboxLockName is the file in an outbox directory that its sidecar holds
// an flock on (see capture.OpenOutbox).
const OutboxLockName = "sidecar.lock"

// ScanOutboxes lists the outbox directories under dir (home.Outboxes()).
// An outbox is live while its sidecar holds the flock on its lock file; an outbox nobody holds was left by a dead sidecar and waits to be
// drained.
func ScanOutboxes(dir string) []OutboxInfo {
	out := []OutboxInfo{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // being created, or set aside as corrupt
		}
		p := filepath.Join(dir, e.Name())
		info := OutboxInfo{Name: e.Name(), Bytes: diskspace.DirSize(p), Live: locked(filepath.Join(p, OutboxLockName)), Stats: readOutboxStats(p)}
		if fi, err := e.Info(); err == nil {
			info.ModifiedAt = fi.ModTime()
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// locked reports whether another process holds an exclusive flock on path.
// It probes with a shared lock, which it drops at once.
func locked(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := filelock.TryLock(f, true); err != nil {
		return true
	}
	_ = filelock.Unlock(f)
	return false
}
