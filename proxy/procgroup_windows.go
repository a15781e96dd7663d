//go:build windows

package proxy

import (
	"os/exec"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// What terminate does, as its log lines name it.
const (
	termName = "CTRL_BREAK_EVENT"
	killName = "TerminateJobObject"
)

// procGroup is a child's Job object, created with
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: the child's own children join it, and
// the system kills them all when the last handle to the job closes, which
// happens when the sidecar exits, however it exits.
//
// The child is assigned to the job just after it starts (Go cannot start
// it suspended), so a process it spawns in its first instants could escape;
// an MCP server spawns its children later than that.
type procGroup struct {
	mu  sync.Mutex
	job windows.Handle // 0: no job (creating or joining it failed)
	cmd *exec.Cmd
}

// prepareGroup makes cmd start in a console process group of its own
// (which CTRL_BREAK_EVENT can address, and Ctrl+C in the sidecar's console
// does not reach), sharing the sidecar's console; when the sidecar has none
// (an agent host that started it detached), the console the child gets is
// hidden rather than popping up a window.
func prepareGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP, HideWindow: true}
}

// newGroup puts the started cmd into a new kill-on-close Job object. When
// that fails (a system that forbids nested jobs), the group falls back to
// the child alone: kill then kills only it.
func newGroup(cmd *exec.Cmd) *procGroup {
	g := &procGroup{cmd: cmd}
	job, err := newKillOnCloseJob()
	if err != nil {
		return g
	}
	proc, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(cmd.Process.Pid))
	if err != nil {
		windows.CloseHandle(job)
		return g
	}
	defer windows.CloseHandle(proc)
	if err := windows.AssignProcessToJobObject(job, proc); err != nil {
		windows.CloseHandle(job)
		return g
	}
	g.job = job
	return g
}

// newKillOnCloseJob creates an unnamed Job object whose processes die when
// its last handle closes.
func newKillOnCloseJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, err
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{
			LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
		},
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, err
	}
	return job, nil
}

// terminate asks the child to stop: a CTRL_BREAK_EVENT to its console
// process group (Node and most runtimes exit on it). Without a console
// shared with the child there is nothing gentler than kill.
func (g *procGroup) terminate() {
	_ = windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(g.cmd.Process.Pid))
}

// kill kills every process of the job (the child alone without one).
func (g *procGroup) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job != 0 {
		_ = windows.TerminateJobObject(g.job, 1)
		return
	}
	_ = g.cmd.Process.Kill()
}

// release closes the job's handle (killing what is left in it).
func (g *procGroup) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job != 0 {
		windows.CloseHandle(g.job)
		g.job = 0
	}
}
