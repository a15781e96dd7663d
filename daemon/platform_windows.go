//go:build windows

package daemon

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// maxSocketPath is the longest path an AF_UNIX socket address holds on
// Windows (sun_path is 108 bytes with its NUL, as on Linux).
const maxSocketPath = 107

// listenUnix listens on an AF_UNIX socket at path (Windows 10 1803 and
// later). Windows has no umask and no file modes: who may connect is who may
// open the file, which the home directory's ACL decides (see Home.Ensure:
// the user, SYSTEM and Administrators only).
func listenUnix(path string) (net.Listener, error) { return net.Listen("unix", path) }

// restrictSocket does nothing on Windows: the socket inherits the home
// directory's ACL, which Home.Ensure restricted to the user.
func restrictSocket(path string) error { return nil }

// fileID identifies the file at path by volume serial number and file
// index, without following the socket's reparse point.
func fileID(path string) ([2]uint64, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return [2]uint64{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	h, err := windows.CreateFile(p, 0, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return [2]uint64{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	defer windows.CloseHandle(h)
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &fi); err != nil {
		return [2]uint64{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return [2]uint64{uint64(fi.VolumeSerialNumber), uint64(fi.FileIndexHigh)<<32 | uint64(fi.FileIndexLow)}, nil
}

// startDetached starts cmd without a console and in a process group of its
// own (Ctrl+C in the starter's console does not reach it), out of the
// starter's Job object when that job allows it: an agent host that kills
// its MCP servers' job must not take the shared daemon with them.
func startDetached(cmd *exec.Cmd) (*exec.Cmd, error) {
	const flags = windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags | windows.CREATE_BREAKAWAY_FROM_JOB, HideWindow: true}
	err := cmd.Start()
	if !errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		return cmd, err
	}
	// The job forbids breakaway: start inside it (a Cmd starts once).
	again := exec.Command(cmd.Path, cmd.Args[1:]...)
	again.Env, again.Dir = cmd.Env, cmd.Dir
	again.Stdin, again.Stdout, again.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	again.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags, HideWindow: true}
	return again, again.Start()
}
