//go:build unix

package proxy

import (
	"os/exec"
	"syscall"
)

// The signals terminate sends, as its log lines name them.
const (
	termName = "SIGTERM"
	killName = "SIGKILL"
)

// procGroup is a child's process group: the child leads it, and its own
// children join it unless they leave on purpose.
type procGroup struct{ pgid int }

// prepareGroup makes cmd start in a process group of its own.
func prepareGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// newGroup returns the group of cmd, started after prepareGroup.
func newGroup(cmd *exec.Cmd) *procGroup { return &procGroup{pgid: cmd.Process.Pid} }

// terminate asks every process of the group to stop (SIGTERM).
func (g *procGroup) terminate() { syscall.Kill(-g.pgid, syscall.SIGTERM) }

// kill kills every process of the group (SIGKILL).
func (g *procGroup) kill() { syscall.Kill(-g.pgid, syscall.SIGKILL) }

// release frees what the group holds: nothing on Unix.
func (g *procGroup) release() {}
