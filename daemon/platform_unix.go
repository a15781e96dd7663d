//go:build unix

package daemon

import (
	"net"
	"os"
	"os/exec"
	"syscall"
)

// listenUnix listens on a Unix socket at path, created mode 0600 (the umask
// is tightened while it is created).
func listenUnix(path string) (net.Listener, error) {
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	return ln, err
}

// restrictSocket sets the socket's mode again, whatever the umask did.
func restrictSocket(path string) error { return os.Chmod(path, 0o600) }

// fileID identifies the file at path by device and inode.
func fileID(path string) ([2]uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return [2]uint64{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, nil
}

// startDetached starts cmd in a session of its own, so that the terminal
// or agent host's signals to the starter's process group do not reach it.
// It returns the command started.
func startDetached(cmd *exec.Cmd) (*exec.Cmd, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd, cmd.Start()
}
