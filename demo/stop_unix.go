//go:build unix

package demo

import (
	"syscall"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
)

// stopDaemon sends SIGTERM to the daemon this demo started and waits until
// it no longer answers.
func stopDaemon(c *daemon.Client, pid int) {
	if pid <= 0 || syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
