package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/internal/safelog"
)

// logCloser flushes a log's pending summaries and closes its file.
type logCloser struct {
	h *safelog.Handler
	f io.Closer
}

func (c logCloser) Close() error {
	c.h.Flush(context.Background())
	return c.f.Close()
}

// openLog opens $HINDSIGHT_HOME/logs/NAME.log (mode 0600; NAME made safe
// as a file name) and returns a JSON slog logger writing to it. Every line
// goes through the redactor (the built-in rules and capture.redact's), each
// source is rate-limited, and the file rotates by size (see Config.Logs and
// package safelog). Stdout is never used for logs: it carries the protocol.
func openLog(g *globals, name string) (*slog.Logger, io.Closer, error) {
	if err := g.home.Ensure(); err != nil {
		return nil, nil, fmt.Errorf("open log: %w", err)
	}
	c := g.config.Logs
	f, err := safelog.Open(filepath.Join(g.home.Logs(), logName(name)+".log"), c.MaxBytes, c.Keep)
	if err != nil {
		return nil, nil, err
	}
	// The runtime's fatal errors (a crash, a memory fault) go to the log
	// too, as the runtime writes them (a daemon's stderr is /dev/null):
	// stack traces, unredacted; the file is 0600 like every log.
	if cf, _, err := safelog.OpenFile(filepath.Join(g.home.Logs(), logName(name)+".log"), os.O_APPEND); err == nil {
		_ = debug.SetCrashOutput(cf, debug.CrashOptions{})
		cf.Close()
	}
	level := slog.LevelInfo
	if os.Getenv("HINDSIGHT_DEBUG") != "" {
		level = slog.LevelDebug
	}
	red, rerr := logRedactor(g)
	h := safelog.NewHandler(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: level}), red,
		safelog.Options{Rate: c.Rate, Burst: c.Burst})
	logger := slog.New(h)
	if rerr != nil {
		logger.Error("the configured redaction rules are broken; logs use the built-in ones", "err", rerr)
	}
	if target := f.Replaced(); target != "" {
		logger.Warn("the log file's path was a symbolic link; it was removed (its target left as it was) and a regular file created in its place", "link_target", target)
	}
	return logger, logCloser{h: h, f: f}, nil
}

// logRedactor is the user's redactor, or the built-in one when the user's
// rules do not compile (a log must still be written, and redacted).
func logRedactor(g *globals) (*capture.Redactor, error) {
	red, err := newRedactor(g)
	if err == nil {
		return red, nil
	}
	builtin, berr := capture.NewRedactor(capture.RedactorConfig{})
	if berr != nil {
		return nil, berr
	}
	return builtin, err
}

// redactName redacts a name given on the command line (a server's, which
// names its log file, its traces and its metrics): a secret in it reaches
// no file.
func redactName(g *globals, name string) string {
	red, _ := logRedactor(g)
	if red == nil {
		return "unnamed" // not even the built-in rules load: keep the name out
	}
	return red.RedactName(name)
}
