package cli

import (
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
)

// startErrorFile is where a daemon that could not start says why, so that
// `hindsight status` can tell the user (the daemon a sidecar starts has no
// terminal); a daemon that starts removes it.
const startErrorFile = "daemon-start-error.json"

// noteStartError records why the daemon of home did not start. Another
// daemon holding the lock is no failure, and is not recorded. Best effort:
// on a full disk the file may not be written (the log line is).
func noteStartError(home hindsight.Home, err error) {
	if err == nil || errors.Is(err, daemon.ErrAlreadyRunning) {
		return
	}
	b, _ := json.Marshal(daemon.StartError{At: time.Now().UTC(), Error: err.Error()})
	_ = os.WriteFile(home.Path(startErrorFile), b, 0o600)
}

// clearStartError removes what noteStartError recorded: the daemon
// started.
func clearStartError(home hindsight.Home) { _ = os.Remove(home.Path(startErrorFile)) }

// readStartError returns why the last daemon of home did not start, or nil.
func readStartError(home hindsight.Home) *daemon.StartError {
	b, err := os.ReadFile(home.Path(startErrorFile))
	if err != nil {
		return nil
	}
	var se daemon.StartError
	if json.Unmarshal(b, &se) != nil || se.Error == "" {
		return nil
	}
	return &se
}
