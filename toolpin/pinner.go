package toolpin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Pinner watches one server's tools/list answers in a sidecar (every
// session of it) and keeps the server's pin file. Without Enforce it only
// reports: the relay is untouched and the tools are digested off the
// relay's path. With Enforce, a tool that is changed or flagged is
// removed from tools/list answers and its calls are answered with a
// JSON-RPC error (proxy.CodeInvalidParams) until it is approved.
type Pinner struct {
	Home    hindsight.Home
	Server  string
	Enforce bool
	Logger  *slog.Logger // nil: slog.Default()

	mu    sync.Mutex
	file  *File     // the pin file as last read or written
	mtime time.Time // its modification time then
	// withheld maps the names of the tools withheld to why (Enforce
	// only); nil when none is, so calls cost one atomic load.
	withheld atomic.Pointer[map[string]string]
	pending  sync.WaitGroup // digests running off the relay's path

	cacheMu sync.Mutex
	cache   map[string]cached // by tool name: its last listing, as listed
}

// cached is a tool's last listing and what hashTool made of it: a server
// lists the same bytes again and again.
type cached struct {
	raw   string
	d     Digest
	title string
}

// New returns the Pinner of server, with the tools its pin file already
// withholds.
func New(home hindsight.Home, server string, enforce bool, logger *slog.Logger) *Pinner {
	p := &Pinner{Home: home, Server: server, Enforce: enforce, Logger: logger}
	p.mu.Lock()
	p.reload()
	p.mu.Unlock()
	return p
}

func (p *Pinner) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// Install puts the Pinner before h's ToolsList and ToolCall hooks: the
// hooks already set (injection) see the tools/list result without the
// tools withheld, and calls the Pinner lets through.
func (p *Pinner) Install(h *proxy.Hooks) {
	nextList, nextCall := h.ToolsList, h.ToolCall
	h.ToolsList = func(ctx context.Context, s *proxy.Session, result json.RawMessage) json.RawMessage {
		out := p.ToolsList(ctx, s, result)
		if nextList == nil {
			return out
		}
		in := result
		if out != nil {
			in = out
		}
		if next := nextList(ctx, s, in); next != nil {
			return next
		}
		return out
	}
	h.ToolCall = func(s *proxy.Session, name string, params json.RawMessage) proxy.LocalHandler {
		if lh := p.ToolCall(s, name, params); lh != nil {
			return lh
		}
		if nextCall == nil {
			return nil
		}
		return nextCall(s, name, params)
	}
}

// Wait waits for the digests running off the relay's path.
func (p *Pinner) Wait() { p.pending.Wait() }

// ToolsList records the tools of a tools/list result. Without Enforce it
// returns nil at once and digests a copy of the result on a goroutine of
// its own; with Enforce it returns the result without the tools withheld
// (nil when none is).
func (p *Pinner) ToolsList(_ context.Context, _ *proxy.Session, result json.RawMessage) json.RawMessage {
	if !p.Enforce {
		cp := bytes.Clone(result)
		p.pending.Go(func() { p.observe(gjson.GetBytes(cp, "tools")) })
		return nil
	}
	tools := gjson.GetBytes(result, "tools")
	withheld := p.observe(tools)
	if len(withheld) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteByte('[')
	n := 0
	for _, t := range tools.Array() {
		if _, ok := withheld[t.Get("name").String()]; ok {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t.Raw)
		n++
	}
	b.WriteByte(']')
	out, err := sjson.SetRawBytes(result, "tools", b.Bytes())
	if err != nil {
		p.logger().Error("withhold tools", "server", p.Server, "err", err)
		return nil
	}
	return out
}

// ToolCall refuses a call of a tool withheld (Enforce only), unless it
// was approved since (the pin file is read again then).
func (p *Pinner) ToolCall(_ *proxy.Session, name string, _ json.RawMessage) proxy.LocalHandler {
	w := p.withheld.Load()
	if w == nil {
		return nil
	}
	if _, ok := (*w)[name]; !ok {
		return nil
	}
	p.mu.Lock()
	p.reload()
	p.mu.Unlock()
	w = p.withheld.Load()
	if w == nil {
		return nil
	}
	why, ok := (*w)[name]
	if !ok {
		return nil
	}
	p.logger().Warn("call of a withheld tool refused", "server", p.Server, "tool", name, "why", why)
	msg := fmt.Sprintf("hindsight: tool %q of server %q is withheld: %s; a person can review it with `hindsight tools list %s` and allow it with `hindsight tools approve %s %s`",
		name, p.Server, why, p.Server, p.Server, name)
	return func(context.Context) (json.RawMessage, error) {
		return nil, &proxy.RPCError{Code: proxy.CodeInvalidParams, Message: msg}
	}
}

// observe records the tools listed and returns those withheld among them
// (Enforce only). The pin file is written only when a tool is new or its
// version changed; a list of tools as pinned costs no file access unless
// some tool is withheld (an approval may have come since).
func (p *Pinner) observe(tools gjson.Result) map[string]string {
	if !tools.IsArray() {
		return nil
	}
	seen, titles := p.digests(tools)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.file == nil {
		p.reload()
		if p.file == nil {
			return nil // the pin file cannot be read: logged
		}
	}
	if p.known(seen) {
		return p.among(seen)
	}
	// Inspect only the versions not recorded yet: it costs most.
	for i := range seen {
		if t := p.file.Tools[seen[i].Name]; t != nil && t.Current == seen[i].Hash {
			seen[i].Flag = t.Flag
			continue
		}
		seen[i].Flag = Inspect(seen[i].Description, titles[i])
	}
	now := time.Now().UTC()
	var events []event
	f, err := update(p.Home, p.Server, func(f *File) bool {
		events = apply(f, seen, now)
		return len(events) > 0
	})
	if err != nil {
		p.logger().Error("record tool pins", "server", p.Server, "err", err)
		return p.among(seen)
	}
	p.set(f)
	for _, e := range events {
		e.log(p.logger(), p.Server, p.Enforce)
	}
	return p.among(seen)
}

// digests hashes the tools of a tools/list result, reusing the digest of
// a tool listed with the same bytes before.
func (p *Pinner) digests(tools gjson.Result) (seen []Digest, titles []string) {
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	if p.cache == nil {
		p.cache = map[string]cached{}
	}
	tools.ForEach(func(_, t gjson.Result) bool {
		name := t.Get("name").String()
		if c, ok := p.cache[name]; ok && c.raw == t.Raw {
			seen, titles = append(seen, c.d), append(titles, c.title)
			return true
		}
		d, title, err := hashTool([]byte(t.Raw))
		if err != nil {
			p.logger().Warn("tool not pinned", "server", p.Server, "err", err)
			return true
		}
		if len(p.cache) < maxCached {
			p.cache[name] = cached{raw: t.Raw, d: d, title: title}
		}
		seen, titles = append(seen, d), append(titles, title)
		return true
	})
	return seen, titles
}

// maxCached bounds the tools whose last listing a Pinner keeps.
const maxCached = 1000

// known reports whether every tool in seen is in the file as last read,
// at the same version, and none is withheld.
func (p *Pinner) known(seen []Digest) bool {
	for _, d := range seen {
		t := p.file.Tools[d.Name]
		if t == nil || t.Current != d.Hash || t.State() != StatePinned {
			return false
		}
	}
	return true
}

// among returns the tools of seen withheld (Enforce only).
func (p *Pinner) among(seen []Digest) map[string]string {
	w := p.withheld.Load()
	if w == nil {
		return nil
	}
	out := map[string]string{}
	for _, d := range seen {
		if why, ok := (*w)[d.Name]; ok {
			out[d.Name] = why
		}
	}
	return out
}

// reload reads the pin file again when it changed on disk. p.mu is held.
func (p *Pinner) reload() {
	st, err := os.Stat(path(p.Home, p.Server))
	if err == nil && p.file != nil && st.ModTime().Equal(p.mtime) {
		return
	}
	f, err := Load(p.Home, p.Server)
	if err != nil {
		p.logger().Error("read tool pins", "server", p.Server, "err", err)
		return
	}
	p.set(f)
}

// set makes f the file as last read, and computes what it withholds. p.mu
// is held.
func (p *Pinner) set(f *File) {
	p.file = f
	if st, err := os.Stat(path(p.Home, p.Server)); err == nil {
		p.mtime = st.ModTime()
	}
	if !p.Enforce {
		return
	}
	w := map[string]string{}
	for name, t := range f.Tools {
		if why := t.Why(); why != "" {
			w[name] = why
		}
	}
	if len(w) == 0 {
		p.withheld.Store(nil)
		return
	}
	p.withheld.Store(&w)
}

// An event is a change apply made to one tool's record, to be logged.
type event struct {
	tool      *Tool
	first     bool   // first sight
	from      string // the hash before (changes)
	backToPin bool   // listed again as the version approved
}

func (e event) log(l *slog.Logger, server string, enforce bool) {
	t := e.tool
	attrs := []any{"server", guard.Printable(server), "tool", guard.Printable(t.Name), "hash", short(t.Current)}
	switch {
	case e.backToPin:
		l.Info("tool listed again as pinned", attrs...)
	case t.State() == StatePinned:
		l.Info("tool pinned at first sight", attrs...)
	case e.first:
		l.Warn("tool flagged at first sight: its description fails validation; not pinned", append(attrs, "flag", t.Flag, "withheld", enforce)...)
	default:
		l.Warn("tool changed since it was pinned; review with `hindsight tools list`, allow with `hindsight tools approve`",
			append(attrs, "pinned", short(t.Approved), "was", short(e.from), "flag", t.Flag, "withheld", enforce)...)
	}
}

// apply records the tools of seen in f and returns what changed.
func apply(f *File, seen []Digest, now time.Time) []event {
	var events []event
	for _, d := range seen {
		t := f.Tools[d.Name]
		if t != nil && t.Current == d.Hash {
			continue
		}
		e := event{first: t == nil}
		if t == nil {
			t = &Tool{Name: d.Name}
			f.Tools[d.Name] = t
			if d.Flag == "" {
				t.Approved, t.ApprovedBy, t.ApprovedAt = d.Hash, ByFirstSight, now
			}
		}
		e.from = t.Current
		t.Current, t.SeenAt, t.Flag = d.Hash, now, d.Flag
		e.backToPin = !e.first && t.Current == t.Approved
		t.addVersion(Version{Hash: d.Hash, FirstSeen: now, Description: cutDescription(guard.Clean(d.Description)), Flag: d.Flag})
		e.tool = t
		events = append(events, e)
	}
	return events
}

// addVersion appends v unless its hash is recorded, dropping the oldest
// version but the approved one past MaxVersions.
func (t *Tool) addVersion(v Version) {
	for _, o := range t.Versions {
		if o.Hash == v.Hash {
			return
		}
	}
	t.Versions = append(t.Versions, v)
	for i := 0; len(t.Versions) > MaxVersions && i < len(t.Versions); {
		if t.Versions[i].Hash == t.Approved || t.Versions[i].Hash == t.Current {
			i++
			continue
		}
		t.Versions = append(t.Versions[:i], t.Versions[i+1:]...)
	}
}

func cutDescription(s string) string {
	if len(s) <= 1000 {
		return s
	}
	n := 1000
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// short is a hash as shown: its first 12 digits.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// Short is a hash as the command line shows it: its first 12 digits.
func Short(h string) string { return short(h) }
