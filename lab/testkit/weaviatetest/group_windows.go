//go:build windows

package weaviatetest

import "os/exec"

// newProcessGroup does nothing on Windows (the tests run on Unix only).
func newProcessGroup(cmd *exec.Cmd) {}

// killProcessGroup kills cmd's process.
func killProcessGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
