// Package safelog keeps secrets and floods out of Hindsight's log files: a
// slog.Handler that redacts every message and string attribute and limits
// the lines each source may write, and a log file rotated by size.
package safelog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Redactor removes secrets from text (capture.Redactor is one).
type Redactor interface {
	RedactString(s string) (string, int)
}

// Options tune a Handler's rate limit.
type Options struct {
	// Rate is the lines per second a source may log in the long run;
	// 0: DefaultRate; <0: no limit.
	Rate float64
	// Burst is how many lines a source may log at once; 0: DefaultBurst.
	Burst int
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultRate  = 20
	DefaultBurst = 200
)

// Handler wraps another slog.Handler. Before a record reaches it:
//
//   - the message and every string attribute (in groups too; errors,
//     Stringers and other values by their text) go through the Redactor;
//     a value holding a secret is replaced by its redacted text;
//   - a per-source token bucket (Options.Rate, Options.Burst) drops
//     records past the limit, where a source is the record's message with
//     its "server" attribute (a child's stderr lines are one source per
//     server). When the source may log again, or at Flush, one record
//     "log lines suppressed" says how many were dropped.
//
// Records are never held back: a record either passes at once or is
// counted.
type Handler struct {
	inner slog.Handler
	red   Redactor
	lim   *limiter
}

// NewHandler wraps inner. red may be nil (no redaction).
func NewHandler(inner slog.Handler, red Redactor, o Options) *Handler {
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Handler{inner: inner, red: red, lim: &limiter{o: o, buckets: map[string]*bucket{}, pending: map[string]*bucket{}}}
}

// Enabled reports what the wrapped handler does.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// Handle redacts r and passes it on, unless its source is over its limit.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "server" {
			key += "\x00" + a.Value.String()
			return false
		}
		return true
	})
	pass, due := h.lim.take(key, h.lim.o.Now())
	for _, s := range due {
		h.summary(ctx, s)
	}
	if !pass {
		return nil
	}
	msg := h.redact(r.Message)
	nr := slog.NewRecord(r.Time, r.Level, msg, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, nr)
}

// Flush writes the summaries of sources that dropped records since their
// last one, whether or not they may log again.
func (h *Handler) Flush(ctx context.Context) {
	for _, s := range h.lim.drain() {
		h.summary(ctx, s)
	}
}

func (h *Handler) summary(ctx context.Context, s suppressed) {
	msg, server, _ := strings.Cut(s.key, "\x00")
	r := slog.NewRecord(h.lim.o.Now(), slog.LevelWarn, "log lines suppressed", 0)
	r.AddAttrs(slog.String("source", h.redact(msg)))
	if server != "" {
		r.AddAttrs(slog.String("server", h.redact(server)))
	}
	r.AddAttrs(slog.Int("suppressed", s.n), slog.Time("since", s.since))
	h.inner.Handle(ctx, r)
}

// WithAttrs redacts as and returns a Handler sharing h's limits.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a)
	}
	return &Handler{inner: h.inner.WithAttrs(out), red: h.red, lim: h.lim}
}

// WithGroup returns a Handler sharing h's limits.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), red: h.red, lim: h.lim}
}

func (h *Handler) redact(s string) string {
	if h.red == nil || s == "" {
		return s
	}
	out, _ := h.red.RedactString(s)
	return out
}

// attr redacts one attribute. Values that are not strings keep their type
// unless their text held a secret.
func (h *Handler) attr(a slog.Attr) slog.Attr {
	if h.red == nil {
		return a
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = h.attr(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.redact(x.Error()))
		case []string:
			// A list of strings is read as a command line: secret-named
			// flags and variables lose their values whatever they are.
			argv := RedactArgv(x)
			out := make([]string, len(argv))
			changed := len(x) > 0 && &argv[0] != &x[0]
			for i, s := range argv {
				out[i] = h.redact(s)
				changed = changed || out[i] != s
			}
			if changed {
				return slog.Any(a.Key, out)
			}
			return slog.Any(a.Key, x)
		case []byte:
			return slog.String(a.Key, h.redact(string(x)))
		case fmt.Stringer:
			text = x.String()
		default:
			text = fmt.Sprintf("%+v", x)
		}
		if r, n := h.red.RedactString(text); n > 0 {
			return slog.String(a.Key, r)
		}
		return slog.Attr{Key: a.Key, Value: v}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// limiter holds one token bucket per source.
type limiter struct {
	o       Options
	mu      sync.Mutex
	buckets map[string]*bucket
	pending map[string]*bucket // the buckets that dropped records since their last summary
}

type bucket struct {
	tokens     float64
	last       time.Time
	suppressed int
	since      time.Time // first record dropped since the last summary
}

// suppressed is a summary due: n records of key dropped since.
type suppressed struct {
	key   string
	n     int
	since time.Time
}

// maxSources bounds the buckets kept; past it, full buckets with nothing
// to report are forgotten.
const maxSources = 4096

// take spends a token of key's bucket at time now, reporting whether the
// record passes, and returns the summaries due (sources over their limit
// that may log again).
func (l *limiter) take(key string, now time.Time) (bool, []suppressed) {
	if l.o.Rate < 0 {
		return true, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var due []suppressed
	for k, b := range l.pending {
		l.refill(b, now)
		if b.tokens >= 1 {
			due = append(due, suppressed{k, b.suppressed, b.since})
			b.suppressed = 0
			b.tokens--
			delete(l.pending, k)
		}
	}
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxSources {
			for k, x := range l.buckets {
				if x.suppressed == 0 && x.tokens >= float64(l.o.Burst) {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: float64(l.o.Burst), last: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, due
	}
	if b.suppressed == 0 {
		b.since = now
		l.pending[key] = b
	}
	b.suppressed++
	return false, due
}

func (l *limiter) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(float64(l.o.Burst), b.tokens+d.Seconds()*l.o.Rate)
		b.last = now
	}
}

// drain returns every summary pending.
func (l *limiter) drain() []suppressed {
	l.mu.Lock()
	defer l.mu.Unlock()
	var due []suppressed
	for k, b := range l.pending {
		due = append(due, suppressed{k, b.suppressed, b.since})
		b.suppressed = 0
		delete(l.pending, k)
	}
	return due
}
