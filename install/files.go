package install

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// writeAtomic replaces the file at path (following symlinks) with data: a
// temporary file in the same directory, with the original's mode, renamed
// over it. If the file no longer holds was (its client rewrote it
// meanwhile), it fails and leaves the file alone.
func writeAtomic(path string, data, was []byte) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".hindsight-*")
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, was) {
		return fmt.Errorf("write config: %s changed while hindsight was rewriting it (is its client running?); nothing written, run again", path)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	done = true
	return nil
}

// writeBackup writes the original bytes of a file to path, mode 0600,
// unless a backup is there already: the first one is the original. It
// reports whether it wrote one.
func writeBackup(path string, data []byte) (bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("write backup: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return false, fmt.Errorf("write backup: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return false, fmt.Errorf("write backup: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return false, fmt.Errorf("write backup: %w", err)
	}
	return true, nil
}

// writeRecord records the SHA-256 of the bytes install wrote to the file at
// path, so that uninstall can tell whether the user edited it since.
func writeRecord(path string, written []byte) error {
	rec := path + RecordSuffix
	if err := os.WriteFile(rec+".tmp", []byte(sum(written)), 0o600); err != nil {
		return fmt.Errorf("write install record: %w", err)
	}
	if err := os.Rename(rec+".tmp", rec); err != nil {
		return fmt.Errorf("write install record: %w", err)
	}
	return nil
}
