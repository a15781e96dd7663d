package daemon

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// OutboxInfo describes one sidecar's outbox directory.
type OutboxInfo struct {
	Name       string    `json:"name"`
	Bytes      int64     `json:"bytes"`
	Live       bool      `json:"live"` // a running sidecar holds it
	ModifiedAt time.Time `json:"modified_at"`
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
		info := OutboxInfo{Name: e.Name(), Bytes: DirSize(p), Live: locked(filepath.Join(p, OutboxLockName))}
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
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
