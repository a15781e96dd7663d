//go:build !windows

package hindsight

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// defaultHome is ~/.hindsight on Linux and macOS alike (a short path: a
// Unix socket's path must fit in 104 bytes on macOS).
func defaultHome() Home {
	if d, err := os.UserHomeDir(); err == nil {
		return Home(filepath.Join(d, ".hindsight"))
	}
	return Home(".hindsight")
}

// privateDir makes dir, which exists, the user's alone: its mode is its
// access control, so one that others may use is set to 0700 when the user
// owns it, and refused when another user does (root included: a home is
// one user's).
func privateDir(dir string, _ bool) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("check home: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("check home: %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("check home: %s is %w (uid %d; you are uid %d), who could read or change its traces and logs: "+
			"use a directory of yours (--home or HINDSIGHT_HOME), or give this one to yourself", dir, ErrNotYours, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("check home: make %s private: %w", dir, err)
		}
	}
	return nil
}
