package hindsight

import (
	"os"
	"path/filepath"
)

// Home is the directory that holds everything Hindsight keeps on a machine
// ($HINDSIGHT_HOME, else ~/.hindsight). Files are created 0600 and
// directories 0700.
type Home string

// DefaultHome returns $HINDSIGHT_HOME, else ~/.hindsight.
func DefaultHome() Home {
	if h := os.Getenv("HINDSIGHT_HOME"); h != "" {
		return Home(h)
	}
	if d, err := os.UserHomeDir(); err == nil {
		return Home(filepath.Join(d, ".hindsight"))
	}
	return Home(".hindsight")
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

// Ensure creates the home directory and its log directory with mode 0700.
func (h Home) Ensure() error {
	for _, d := range []string{string(h), h.Logs()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}
