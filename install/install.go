// Package install puts Hindsight in front of the MCP servers that MCP
// clients (Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Codex)
// are configured to start, and takes it out again.
//
// Install rewrites each stdio server entry so that the client starts
// `HINDSIGHT wrap --name ENTRY -- COMMAND ARGS…` instead of COMMAND ARGS…;
// env, cwd and every other field stay as they are. HTTP and SSE entries are
// left alone: the result says how to front them with `hindsight serve`.
// Only the bytes of the changed values are rewritten, so comments,
// formatting and the order of keys survive (JSON, JSON with comments and
// trailing commas, TOML).
//
// Before it first changes a file, Install keeps the original bytes in
// FILE.hindsight-backup (mode 0600; never overwritten), and after each
// change it records the SHA-256 of the bytes it wrote in
// FILE.hindsight-installed. Uninstall restores the backup byte for byte
// when the file is still what Install wrote; when the user has edited it
// since, it only unwraps the entries Install wrapped and keeps the edits.
// Either way it removes the backup and the record. Files are replaced
// atomically (temporary file and rename) with their mode kept; a file
// that does not parse is reported with its position and left untouched.
package install

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aymanbagabas/go-udiff"
)

// Suffixes of the files kept beside a configuration file.
const (
	BackupSuffix = ".hindsight-backup"
	RecordSuffix = ".hindsight-installed"
)

// server is one MCP server entry of a configuration file.
type server struct {
	Where     string // the list it is in, e.g. "mcpServers", "projects[\"/p\"].mcpServers"
	Name      string
	Transport string // "stdio", "http", "sse"; "" when it is neither
	Command   string
	Args      []string
	URL       string
	Skip      string // why the entry cannot be rewritten, "" when it can
}

// keys identifies each server within its file: where, name and, for a
// name given twice, which one.
func keys(list []server) []string {
	seen := map[string]int{}
	out := make([]string, len(list))
	for i, s := range list {
		k := s.Where + "\x00" + s.Name
		out[i] = fmt.Sprintf("%s\x00%d", k, seen[k])
		seen[k]++
	}
	return out
}

// change rewrites one server's command line: Command replaces the
// command, and the first Drop arguments are replaced by Prepend.
// RemoveArgs, with Drop, removes the args key altogether: the entry had
// none before install added it.
type change struct {
	Command    string
	Prepend    []string
	Drop       int
	RemoveArgs bool
}

// document is a parsed configuration file.
type document interface {
	// servers lists the file's MCP server entries in file order.
	servers() []server
	// rewrite returns the file's bytes with the changes applied to the
	// servers (by index into servers()), everything else byte for byte.
	rewrite(changes map[int]change) ([]byte, error)
}

// Options are the settings of Install and Uninstall.
type Options struct {
	// Exe is the hindsight command written into the configurations.
	Exe string
	// DryRun computes the results and diffs without writing anything.
	DryRun bool
}

// Result is what Install or Uninstall did, or would do, to one file.
type Result struct {
	Client  string         `json:"client"`
	Scope   string         `json:"scope"`
	Path    string         `json:"path"`
	Action  string         `json:"action"` // see the Action constants
	Servers []ServerResult `json:"servers"`
	Diff    string         `json:"diff,omitempty"`
	Backup  string         `json:"backup,omitempty"`
	Err     string         `json:"error,omitempty"`
}

// Actions of a Result.
const (
	ActionWrap      = "wrap"      // install rewrote (or would rewrite) the file
	ActionUnchanged = "unchanged" // nothing to do
	ActionRestore   = "restore"   // uninstall put the backup back
	ActionUnwrap    = "unwrap"    // uninstall unwrapped entries of an edited file
	ActionError     = "error"     // the file was left untouched
)

// ServerResult is one server entry of a Result.
type ServerResult struct {
	Where     string `json:"where"`
	Name      string `json:"name"`
	Transport string `json:"transport"`
	Status    string `json:"status"`
	URL       string `json:"url,omitempty"`
	Hint      string `json:"hint,omitempty"`
}

// Statuses of a ServerResult.
const (
	StatusWrapped        = "wrapped"
	StatusAlreadyWrapped = "already wrapped"
	StatusUnwrapped      = "unwrapped"
	StatusNotWrapped     = "not wrapped"
	StatusKept           = "kept (wrapped before install)"
	StatusKeptNoBackup   = "wrapped, not by install (no backup): left alone"
	StatusHTTP           = "left alone (HTTP)"
	StatusSkipped        = "left alone"
)

// Install wraps the stdio servers of each location's file (see the package
// documentation) and returns one Result per file, in order.
func Install(locs []Location, opts Options) []Result {
	out := make([]Result, 0, len(locs))
	for _, l := range locs {
		out = append(out, installFile(l, opts))
	}
	return out
}

// Uninstall undoes Install for each location's file and returns one Result
// per file, in order.
func Uninstall(locs []Location, opts Options) []Result {
	out := make([]Result, 0, len(locs))
	for _, l := range locs {
		out = append(out, uninstallFile(l, opts))
	}
	return out
}

// newResult is an empty Result for l.
func newResult(l Location) Result {
	return Result{Client: l.Client, Scope: l.Scope, Path: l.Path, Servers: []ServerResult{}}
}

// fail marks r as an error: the file was left untouched.
func fail(r Result, err error) Result {
	r.Action, r.Err = ActionError, err.Error()
	return r
}

// installFile installs into the file at l: it writes the backup (the first
// time), the rewritten file and the record, unless opts.DryRun.
func installFile(l Location, opts Options) Result {
	r := newResult(l)
	src, err := os.ReadFile(l.Path)
	if err != nil {
		return fail(r, fmt.Errorf("read config: %w", err))
	}
	r, out := planInstall(l, src, opts.Exe)
	if r.Action != ActionWrap || opts.DryRun {
		return r
	}
	// The record says "the file is what install wrote, and the backup is
	// the file without install": that holds after the first install, and
	// after one onto a file still as install left it. Onto a file edited
	// since, the backup lacks those edits, so uninstall must unwrap.
	rec, _ := os.ReadFile(l.Path + RecordSuffix)
	created, err := writeBackup(r.Backup, src)
	if err != nil {
		return fail(r, err)
	}
	keepRecord := created || string(rec) == sum(src)
	if err := writeAtomic(l.Path, out, src); err != nil {
		if created {
			os.Remove(r.Backup) // nothing was installed: no backup either
		}
		return fail(r, err)
	}
	if !keepRecord {
		if err := os.Remove(l.Path + RecordSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(r, fmt.Errorf("remove install record: %w", err))
		}
		return r
	}
	if err := writeRecord(l.Path, out); err != nil {
		return fail(r, err)
	}
	return r
}

// planInstall computes what install does to src, the bytes of the file at
// l, and the bytes it would write (nil when it writes nothing).
func planInstall(l Location, src []byte, exe string) (Result, []byte) {
	r := newResult(l)
	doc, err := parse(l.Format, l.Path, src)
	if err != nil {
		return fail(r, err), nil
	}
	changes := map[int]change{}
	for i, s := range doc.servers() {
		sr := ServerResult{Where: s.Where, Name: s.Name, Transport: s.Transport, URL: s.URL}
		switch {
		case s.Transport == "http" || s.Transport == "sse":
			sr.Status = StatusHTTP
			sr.Hint = serveHint(s)
		case s.Skip != "":
			sr.Status = StatusSkipped + ": " + s.Skip
		default:
			if _, ok := wrappedAt(s.Command, s.Args); ok {
				sr.Status = StatusAlreadyWrapped
				break
			}
			sr.Status = StatusWrapped
			changes[i] = change{Command: exe, Prepend: wrapArgs(s.Name, s.Command, nil)}
		}
		r.Servers = append(r.Servers, sr)
	}
	if len(changes) == 0 {
		r.Action = ActionUnchanged
		return r, nil
	}
	out, err := doc.rewrite(changes)
	if err != nil {
		return fail(r, fmt.Errorf("rewrite %s: %w", l.Path, err)), nil
	}
	r.Action = ActionWrap
	r.Diff = diff(l.Path, src, out)
	r.Backup = l.Path + BackupSuffix
	return r, out
}

// uninstallFile uninstalls from the file at l: it restores the backup or
// unwraps, then removes the backup and the record, unless opts.DryRun. A
// file without a backup is left alone.
func uninstallFile(l Location, opts Options) Result {
	r := newResult(l)
	src, err := os.ReadFile(l.Path)
	if err != nil {
		return fail(r, fmt.Errorf("read config: %w", err))
	}
	backupPath := l.Path + BackupSuffix
	backup, err := os.ReadFile(backupPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(r, fmt.Errorf("read backup: %w", err))
	}
	rec, _ := os.ReadFile(l.Path + RecordSuffix)
	r, out := planUninstall(l, src, backup, string(rec))
	if r.Backup == "" || r.Action == ActionError || opts.DryRun {
		return r
	}
	if string(out) != string(src) {
		if err := writeAtomic(l.Path, out, src); err != nil {
			return fail(r, err)
		}
	}
	if err := os.Remove(l.Path + RecordSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(r, fmt.Errorf("remove install record: %w", err))
	}
	if err := os.Remove(backupPath); err != nil {
		return fail(r, fmt.Errorf("remove backup: %w", err))
	}
	return r
}

// planUninstall computes what uninstall does to src, the bytes of the file
// at l, given its backup (nil when there is none) and install record, and
// the bytes it would leave in the file.
func planUninstall(l Location, src, backup []byte, record string) (Result, []byte) {
	r := newResult(l)
	doc, err := parse(l.Format, l.Path, src)
	if err != nil {
		return fail(r, err), nil
	}
	if backup == nil {
		// Install never changed this file: whatever is wrapped was
		// wrapped by hand and stays.
		for _, s := range doc.servers() {
			sr := unwrapStatus(s, true)
			if sr.Status == StatusKept {
				sr.Status = StatusKeptNoBackup
			}
			r.Servers = append(r.Servers, sr)
		}
		r.Action = ActionUnchanged
		return r, src
	}
	r.Backup = l.Path + BackupSuffix
	var out []byte
	if record == sum(src) {
		// The file is what install wrote: the backup is the answer.
		out, r.Action = backup, ActionRestore
		for _, s := range doc.servers() {
			r.Servers = append(r.Servers, unwrapStatus(s, false))
		}
	} else {
		// Edited since: unwrap what install wrapped, keep the rest.
		kept, noArgs := map[string]bool{}, map[string]bool{}
		if bdoc, err := parse(l.Format, r.Backup, backup); err == nil {
			bk := keys(bdoc.servers())
			for i, s := range bdoc.servers() {
				if _, ok := wrappedAt(s.Command, s.Args); ok {
					kept[bk[i]] = true
				}
				if s.Transport == "stdio" && s.Args == nil {
					noArgs[bk[i]] = true
				}
			}
		}
		changes := map[int]change{}
		k := keys(doc.servers())
		for i, s := range doc.servers() {
			sr := unwrapStatus(s, kept[k[i]])
			if sr.Status == StatusUnwrapped {
				at, _ := wrappedAt(s.Command, s.Args)
				changes[i] = change{Command: s.Args[at], Drop: at + 1,
					RemoveArgs: noArgs[k[i]] && len(s.Args) == at+1}
			}
			r.Servers = append(r.Servers, sr)
		}
		out, r.Action = src, ActionUnwrap
		if len(changes) > 0 {
			if out, err = doc.rewrite(changes); err != nil {
				return fail(r, fmt.Errorf("rewrite %s: %w", l.Path, err)), nil
			}
		}
	}
	r.Diff = diff(l.Path, src, out)
	return r, out
}

// unwrapStatus says what uninstall does to s; keep marks an entry that was
// wrapped before install ran.
func unwrapStatus(s server, keep bool) ServerResult {
	sr := ServerResult{Where: s.Where, Name: s.Name, Transport: s.Transport, URL: s.URL, Status: StatusNotWrapped}
	if _, ok := wrappedAt(s.Command, s.Args); ok && s.Skip == "" {
		sr.Status = StatusUnwrapped
		if keep {
			sr.Status = StatusKept
		}
	}
	return sr
}

// serveHint is the command that fronts an HTTP entry with a sidecar.
func serveHint(s server) string {
	url := s.URL
	if url == "" {
		url = "URL"
	}
	return fmt.Sprintf("hindsight serve --listen 127.0.0.1:PORT --upstream %s --name %s, then point the entry at http://127.0.0.1:PORT/%s", url, s.Name, map[bool]string{true: "sse", false: "mcp"}[s.Transport == "sse"])
}

// diff is the unified diff from old to new of the file at path, "" when
// they are equal.
func diff(path string, old, new []byte) string {
	if string(old) == string(new) {
		return ""
	}
	p := filepath.ToSlash(path)
	return udiff.Unified(p, p, string(old), string(new))
}

// sum is the hex SHA-256 of b.
func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
