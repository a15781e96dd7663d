package safelog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/internal/safelog"
	"github.com/tidwall/gjson"
)

// secret is a GitHub token the built-in redactor knows.
const secret = "ghp_Zk3qR8vT2mW9xY4nB6cD1eF5gH7jK0lPq2sT"

type stringer string

func (s stringer) String() string { return string(s) }

func redactor(t *testing.T) *capture.Redactor {
	t.Helper()
	red, err := capture.NewRedactor(capture.RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return red
}

func TestHandlerRedacts(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
		keep string // text that must survive
	}{
		{"message", func(l *slog.Logger) { l.Info("token " + secret) }, "token"},
		{"string attribute", func(l *slog.Logger) { l.Info("server stderr", "line", "auth "+secret) }, "server stderr"},
		{"error", func(l *slog.Logger) { l.Warn("upstream", "err", errors.New("401: bad token "+secret)) }, "401"},
		{"command line", func(l *slog.Logger) { l.Info("wrap starting", "command", []string{"srv", "--token", secret}) }, "--token"},
		{"stringer", func(l *slog.Logger) { l.Info("x", "v", stringer("k="+secret)) }, `"msg":"x"`},
		{"url", func(l *slog.Logger) { l.Info("serving", "upstream", "https://user:hunter2hunter2@mcp.example/mcp") }, "mcp.example"},
		{"struct", func(l *slog.Logger) { l.Info("x", "v", struct{ Token string }{secret}) }, `"msg":"x"`},
		{"group", func(l *slog.Logger) { l.Info("x", slog.Group("g", "line", secret)) }, `"g":{`},
		{"with attrs", func(l *slog.Logger) { l.With("cmd", secret).Info("x") }, `"msg":"x"`},
		{"with group", func(l *slog.Logger) { l.WithGroup("g").Info("x", "line", secret) }, `"g":{`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := slog.New(safelog.NewHandler(slog.NewJSONHandler(&buf, nil), redactor(t), safelog.Options{}))
			tc.log(l)
			out := buf.String()
			if strings.Contains(out, secret) || strings.Contains(out, "hunter2hunter2") {
				t.Errorf("secret in the log: %s", out)
			}
			if !strings.Contains(out, tc.keep) || !strings.Contains(out, "REDACTED") {
				t.Errorf("want %q and a placeholder in %s", tc.keep, out)
			}
		})
	}
}

// TestHandlerRateLimit: a source past its burst is cut off, other sources
// are not, and one summary says how many lines were dropped.
func TestHandlerRateLimit(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	var buf bytes.Buffer
	h := safelog.NewHandler(slog.NewJSONHandler(&buf, nil), nil, safelog.Options{Rate: 1, Burst: 5, Now: clock})
	l := slog.New(h)
	for i := range 100 {
		l.Info("server stderr", "server", "noisy", "n", i)
	}
	l.Info("server stderr", "server", "quiet", "n", 0)
	l.Info("other message")
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }
	count := func(server string) (n int) {
		for _, line := range lines() {
			if gjson.Get(line, "msg").Str == "server stderr" && gjson.Get(line, "server").Str == server {
				n++
			}
		}
		return n
	}
	if n := count("noisy"); n != 5 {
		t.Errorf("noisy source wrote %d lines, want its burst of 5", n)
	}
	if n := count("quiet"); n != 1 {
		t.Errorf("a quiet source of the same message wrote %d lines, want 1", n)
	}
	if strings.Contains(buf.String(), "suppressed") {
		t.Errorf("a summary before the source may log again: %s", buf.String())
	}
	now = now.Add(3 * time.Second) // three tokens back: one for the summary
	l.Info("server stderr", "server", "noisy", "n", 100)
	var summary string
	for _, line := range lines() {
		if gjson.Get(line, "msg").Str == "log lines suppressed" {
			summary = line
		}
	}
	if gjson.Get(summary, "suppressed").Int() != 95 || gjson.Get(summary, "server").Str != "noisy" || gjson.Get(summary, "source").Str != "server stderr" {
		t.Errorf("summary %q; want 95 lines of server stderr from noisy", summary)
	}
	if n := count("noisy"); n != 6 {
		t.Errorf("after the refill noisy wrote %d lines in all, want 6", n)
	}
	for range 10 {
		l.Info("server stderr", "server", "noisy")
	}
	h.Flush(context.Background())
	if !strings.Contains(lines()[len(lines())-1], `"suppressed":9`) {
		t.Errorf("Flush: last line %s, want a summary of 9", lines()[len(lines())-1])
	}
}

func TestFileRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.log")
	f, err := safelog.Open(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		fmt.Fprintf(f, "line %02d of some length\n", i) // 24 bytes
	}
	f.Close()
	entries, _ := os.ReadDir(dir)
	var names []string
	total := 0
	for _, e := range entries {
		names = append(names, e.Name())
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if len(b) > 100 {
			t.Errorf("%s has %d bytes, over the cap of 100", e.Name(), len(b))
		}
		total += len(b)
		if info, _ := e.Info(); info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}
	if strings.Join(names, " ") != "x.log x.log.1 x.log.2" {
		t.Errorf("files %q, want x.log and two rotated ones", names)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(b), "line 49 of some length\n") {
		t.Errorf("the newest lines are not in x.log: %q", b)
	}
	if total >= 50*24 {
		t.Errorf("nothing was dropped: %d bytes kept", total)
	}
}
