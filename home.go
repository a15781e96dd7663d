package hindsight

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Home is the directory that holds everything Hindsight keeps on a machine
// ($HINDSIGHT_HOME, else ~/.hindsight on Linux and macOS,
// %LOCALAPPDATA%\Hindsight on Windows). Files are created 0600 and
// directories 0700 (on Windows, the home's ACL admits only the user).
type Home string

// DefaultHome returns the system's default home (see Home); the command
// line reads $HINDSIGHT_HOME, which overrides it. The default is found
// from the user's home directory ($HOME, %LOCALAPPDATA% on Windows), a
// property of the process rather than configuration.
func DefaultHome() Home {
	return defaultHome()
}

// Path joins elem to the home directory.
func (h Home) Path(elem ...string) string {
	return filepath.Join(append([]string{string(h)}, elem...)...)
}

// Socket is the daemon's Unix socket (mode 0600).
func (h Home) Socket() string { return h.Path("hindsight.sock") }

// Logs is the directory of log files; stdout belongs to the protocol.
func (h Home) Logs() string { return h.Path("logs") }

// Outboxes is the directory holding one Badger outbox per sidecar.
func (h Home) Outboxes() string { return h.Path("outbox") }

// DaemonData is the daemon's Badger directory (traces, queue, experiences).
func (h Home) DaemonData() string { return h.Path("daemon") }

// ErrNotYours is the error of a home (or its log directory) that another
// user owns.
var ErrNotYours = errors.New("owned by another user")

// Ensure creates the home directory and its log directory with mode 0700
// (on Windows, it gives the home an ACL that admits only the user). On
// Unix, existing ones that others may read or write are tightened to 0700
// when the user owns them, and refused (ErrNotYours) when another user
// does: that user could read the traces and logs, or change them. On
// Windows a home another user owns is refused likewise.
func (h Home) Ensure() error {
	for i, d := range []string{string(h), h.Logs()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create home: %w", err)
		}
		if err := privateDir(d, i == 0); err != nil {
			return err
		}
	}
	return nil
}
