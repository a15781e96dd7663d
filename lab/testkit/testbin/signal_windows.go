//go:build windows

package testbin

import "os"

// terminatePid kills pid: Windows has no SIGTERM for another process.
func terminatePid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// killPid kills pid.
func killPid(pid int) { _ = terminatePid(pid) }
