//go:build unix

package weaviatetest

import (
	"os/exec"
	"syscall"
)

// newProcessGroup makes cmd start in a process group of its own.
func newProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killProcessGroup kills cmd's process group.
func killProcessGroup(cmd *exec.Cmd) { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
