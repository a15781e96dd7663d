//go:build windows

package demo

import (
	"os"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
)

// stopDaemon ends the daemon this demo started. Windows has no SIGTERM to
// send a detached process, so it is killed, which its Badger databases
// survive (they recover from their logs on the next start), and waited for.
func stopDaemon(c *daemon.Client, pid int) {
	if pid <= 0 {
		return
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	_ = p.Kill()
	done := make(chan struct{})
	go func() { _, _ = p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}
