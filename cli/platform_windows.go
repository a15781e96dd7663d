//go:build windows

package cli

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// exeSuffix ends an executable's file name.
const exeSuffix = ".exe"

// isExecutable reports true: Windows keeps no execute bit (the suffix
// says it).
func isExecutable(os.FileInfo) bool { return true }

// execReplace runs path in place of this process, as far as Windows allows:
// it has no exec, so path runs as a child with this process's standard
// streams, and this process exits with its exit code when it ends. It
// returns only when path cannot be started.
func execReplace(path string, args, env []string) error {
	cmd := exec.Command(path, args[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// A detached daemon has no console: the one hindsightd would get is
	// hidden rather than shown.
	cmd.SysProcAttr = &syscall.SysProcAttr{HideWindow: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	}
	os.Exit(1)
	return nil
}

// privateUmask does nothing on Windows, which has no umask: the home
// directory's ACL (see hindsight.Home.Ensure) keeps what the daemon writes
// private.
func privateUmask() {}
