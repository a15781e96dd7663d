package badgerdb

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// NewLogger returns a badger.Logger writing to l, never to stdout (which
// belongs to the MCP protocol in a sidecar). Badger is chatty at info
// level: those lines go to debug.
func NewLogger(l *slog.Logger) badger.Logger { return logger{l} }

type logger struct{ l *slog.Logger }

func (b logger) Errorf(f string, a ...any)   { b.l.Error(line(f, a)) }
func (b logger) Warningf(f string, a ...any) { b.l.Warn(line(f, a)) }
func (b logger) Infof(f string, a ...any)    { b.debug(f, a) }
func (b logger) Debugf(f string, a ...any)   { b.debug(f, a) }

// debug logs at debug level, formatting only when the logger takes debug
// lines: Badger writes one on every commit.
func (b logger) debug(f string, a []any) {
	if b.l.Enabled(context.Background(), slog.LevelDebug) {
		b.l.Debug(line(f, a))
	}
}

func line(f string, a []any) string {
	return "badger: " + strings.TrimSpace(fmt.Sprintf(f, a...))
}
