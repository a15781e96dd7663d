//go:build unix

package testbin

import "syscall"

// terminatePid asks pid to stop (SIGTERM).
func terminatePid(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }

// killPid kills pid (SIGKILL).
func killPid(pid int) { syscall.Kill(pid, syscall.SIGKILL) }
