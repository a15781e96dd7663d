// Package toolpin pins the tools each server lists: a hash of every tool's
// name, description and input schema (canonical JSON), recorded per
// version under $HINDSIGHT_HOME/tools/, one file per server. A tool whose
// hash differs from the one pinned (a description rewritten between
// sessions, or after notifications/tools/list_changed), or whose
// description fails guard.Check or hides characters no reader sees, is
// reported (log, `hindsight status`, `hindsight tools list`, the daemon's
// API and metrics); a Pinner that enforces withholds it from tools/list
// and refuses its calls until `hindsight tools approve SERVER TOOL`.
// Everything stays on this machine.
package toolpin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/filelock"
)

// States of a tool.
const (
	// StatePinned: the tool as last listed is the version approved (at
	// first sight, or by `hindsight tools approve`).
	StatePinned = "pinned"
	// StateChanged: the tool as last listed differs from the version
	// approved.
	StateChanged = "changed"
	// StateFlagged: the tool as last listed is not the version approved
	// (or none was: a tool flagged at first sight is not pinned), and its
	// description fails validation (Inspect).
	StateFlagged = "flagged"
)

// Who approved a version.
const (
	ByFirstSight = "first-sight"
	ByUser       = "user"
)

// MaxVersions bounds the versions a tool's record keeps (the oldest go
// first; the approved one stays).
const MaxVersions = 20

// ErrUnknownTool is returned by Approve for a server or tool never listed.
var ErrUnknownTool = errors.New("no such tool seen")

// File is what is pinned of one server's tools.
type File struct {
	Server string           `json:"server"`
	Tools  map[string]*Tool `json:"tools"`
}

// Tool is one tool's record.
type Tool struct {
	Name string `json:"name"`
	// Approved is the hash of the version approved; "" when none was
	// (a tool flagged at first sight).
	Approved   string    `json:"approved,omitempty"`
	ApprovedBy string    `json:"approved_by,omitempty"` // ByFirstSight or ByUser
	ApprovedAt time.Time `json:"approved_at,omitzero"`
	// Current is the hash of the version last listed, SeenAt when it was
	// first listed.
	Current string    `json:"current"`
	SeenAt  time.Time `json:"seen_at"`
	// Flag says why Current's description fails validation; "" when it
	// passes.
	Flag     string    `json:"flag,omitempty"`
	Versions []Version `json:"versions"`
}

// Version is one version of a tool that was listed.
type Version struct {
	Hash      string    `json:"hash"`
	FirstSeen time.Time `json:"first_seen"`
	// Description is the version's description as stored (guard.Clean,
	// at most 1,000 bytes), for review.
	Description string `json:"description,omitempty"`
	Flag        string `json:"flag,omitempty"`
}

// State is the tool's state: StatePinned, StateChanged or StateFlagged.
func (t *Tool) State() string {
	switch {
	case t.Current == t.Approved:
		return StatePinned
	case t.Flag != "":
		return StateFlagged
	}
	return StateChanged
}

// Why says, in a sentence for the agent and the log, why a tool that is
// not pinned is withheld.
func (t *Tool) Why() string {
	switch t.State() {
	case StateFlagged:
		return "its description fails validation (" + t.Flag + ")"
	case StateChanged:
		return "its definition changed since it was pinned"
	}
	return ""
}

// Dir is the directory of the pin files in home.
func Dir(home hindsight.Home) string { return home.Path("tools") }

// path is server's pin file: its name made safe for a file name, with a
// hash of the name when that changed it (two names never share a file).
func path(home hindsight.Home, server string) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, server)
	if safe != server || safe == "" {
		sum := sha256.Sum256([]byte(server))
		safe += "-" + hex.EncodeToString(sum[:4])
	}
	return filepath.Join(Dir(home), safe+".json")
}

// Load reads server's pin file; a server never seen has an empty one.
func Load(home hindsight.Home, server string) (*File, error) {
	return read(path(home, server), server)
}

func read(p, server string) (*File, error) {
	f := &File{Server: server, Tools: map[string]*Tool{}}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tool pins: %w", err)
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("read tool pins %s: %w", p, err)
	}
	if f.Tools == nil {
		f.Tools = map[string]*Tool{}
	}
	return f, nil
}

// List reads the pin files of every server, sorted by server. A file that
// cannot be read is skipped and its error returned with the rest.
func List(home hindsight.Home) ([]*File, error) {
	paths, _ := filepath.Glob(filepath.Join(Dir(home), "*.json"))
	var out []*File
	var errs []error
	for _, p := range paths {
		f, err := read(p, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out, errors.Join(errs...)
}

// Names returns f's tool names, sorted.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Tools))
	for n := range f.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Approve pins the version of server's tool last listed, and returns the
// tool's record.
func Approve(home hindsight.Home, server, tool string, now time.Time) (*Tool, error) {
	var out *Tool
	_, err := update(home, server, func(f *File) bool {
		t := f.Tools[tool]
		if t == nil {
			return false
		}
		t.Approved, t.ApprovedBy, t.ApprovedAt = t.Current, ByUser, now.UTC()
		c := *t
		out = &c
		return true
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("approve %s %s: %w", server, tool, ErrUnknownTool)
	}
	return out, nil
}

// lockWait bounds waiting for another process's update of the same file.
const lockWait = 2 * time.Second

// update loads server's pin file under its lock, lets fn change it, and
// writes it back (whole, by rename) when fn reports a change. It returns
// the file as it stands after fn.
func update(home hindsight.Home, server string, fn func(f *File) bool) (*File, error) {
	p := path(home, server)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("create tool pins directory: %w", err)
	}
	lock, err := os.OpenFile(p+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open tool pins lock: %w", err)
	}
	defer lock.Close()
	for deadline := time.Now().Add(lockWait); ; {
		err := filelock.TryLock(lock, false)
		if err == nil {
			break
		}
		if !errors.Is(err, filelock.ErrWouldBlock) || time.Now().After(deadline) {
			return nil, fmt.Errorf("lock tool pins: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer filelock.Unlock(lock)
	f, err := read(p, server)
	if err != nil {
		return nil, err
	}
	f.Server = server
	if !fn(f) {
		return f, nil
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode tool pins: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("write tool pins: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return nil, fmt.Errorf("write tool pins: %w", err)
	}
	return f, nil
}

// Alert is a tool that is not pinned, as `hindsight status` shows it.
type Alert struct {
	Server  string    `json:"server"`
	Tool    string    `json:"tool"`
	State   string    `json:"state"`
	Flag    string    `json:"flag,omitempty"`
	Pinned  string    `json:"pinned,omitempty"` // hash of the version approved
	Current string    `json:"current"`
	SeenAt  time.Time `json:"seen_at"`
}

// Summary is what status reports of the pins under a home: how many tools
// are in each state, and those not pinned.
type Summary struct {
	Counts map[string]int `json:"counts"` // by state
	Alerts []Alert        `json:"alerts"`
	Error  string         `json:"error,omitempty"` // a pin file that cannot be read
}

// Summarize reads every pin file under home.
func Summarize(home hindsight.Home) Summary {
	files, err := List(home)
	s := Summary{Counts: map[string]int{}, Alerts: []Alert{}}
	if err != nil {
		s.Error = err.Error()
	}
	for _, f := range files {
		for _, name := range f.Names() {
			t := f.Tools[name]
			st := t.State()
			s.Counts[st]++
			if st != StatePinned {
				s.Alerts = append(s.Alerts, Alert{Server: f.Server, Tool: name, State: st, Flag: t.Flag,
					Pinned: t.Approved, Current: t.Current, SeenAt: t.SeenAt})
			}
		}
	}
	return s
}
