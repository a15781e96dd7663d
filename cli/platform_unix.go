//go:build unix

package cli

import (
	"os"
	"syscall"
)

// exeSuffix ends an executable's file name.
const exeSuffix = ""

// isExecutable reports whether st's mode lets someone execute the file.
func isExecutable(st os.FileInfo) bool { return st.Mode()&0o111 != 0 }

// execReplace replaces the process with path (execve). It returns only on
// failure.
func execReplace(path string, args, env []string) error { return syscall.Exec(path, args, env) }

// privateUmask makes everything the process creates from now on private
// to its user (umask 077).
func privateUmask() { syscall.Umask(0o077) }
