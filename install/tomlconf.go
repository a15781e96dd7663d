package install

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"
	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// tomlDoc is Codex's config.toml. It is decoded with go-toml for its
// meaning and scanned with go-toml's parser for the byte ranges of each
// server's command and args, which are the only bytes a rewrite changes:
// comments, layout and every other table stay as written.
type tomlDoc struct {
	path  string
	src   []byte
	list  []server
	spans []tomlSpans // parallel to list
}

// span is a byte range [start, end) of the source.
type span struct{ start, end int }

// tomlSpans locates one server's command and args in the source.
type tomlSpans struct {
	cmd      span   // the command's string value, quotes included
	keyStart int    // where the command's key (all of a dotted key) starts
	lastKey  int    // where the key's last part ("command") starts
	hasArgs  bool   // an args array of strings was found
	argsKey  int    // where the args key starts
	open     int    // the args array's '['
	close    int    // the args array's ']'
	elems    []span // the args array's elements
	found    bool   // command was found as a key of [mcp_servers.NAME]
}

func parseTOML(path string, src []byte) (*tomlDoc, error) {
	var m map[string]any
	if err := toml.Unmarshal(src, &m); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("parse %s: line %d, column %d: %s", path, row, col, de.Error())
		}
		if off, ok := redefinition(src); ok {
			row, col := lineColumn(src, off)
			return nil, fmt.Errorf("parse %s: line %d, column %d: %w", path, row, col, err)
		}
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	d := &tomlDoc{path: path, src: src}
	order, spans, err := scanTOML(src)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	servers, _ := m["mcp_servers"].(map[string]any)
	// File order first, then any the scan did not place (inline tables).
	var names []string
	for _, n := range order {
		if _, ok := servers[n]; ok {
			names = append(names, n)
		}
	}
	var rest []string
	for n := range servers {
		if !slices.Contains(names, n) {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	for _, name := range append(names, rest...) {
		s := server{Where: "mcp_servers", Name: name}
		sp := spans[name]
		entry, ok := servers[name].(map[string]any)
		if !ok {
			s.Skip = "not a table"
			d.list, d.spans = append(d.list, s), append(d.spans, tomlSpans{})
			continue
		}
		s.Command, _ = entry["command"].(string)
		s.URL, _ = entry["url"].(string)
		s.Transport = transport("", s.Command, s.URL)
		if args, ok := entry["args"]; ok {
			list, ok := args.([]any)
			if !ok {
				s.Skip = "args is not a list"
			}
			s.Args = []string{}
			for _, a := range list {
				str, ok := a.(string)
				if !ok {
					s.Skip = "args is not a list of strings"
					break
				}
				s.Args = append(s.Args, str)
			}
		}
		switch {
		case s.Transport == "":
			s.Skip = "neither a command nor a URL"
		case s.Transport != "stdio" || s.Skip != "":
		case !sp.found || (s.Args != nil && !sp.hasArgs):
			s.Skip = "not written as keys of a [mcp_servers." + name + "] table (an inline table?), so not rewritten"
		}
		d.list, d.spans = append(d.list, s), append(d.spans, sp)
	}
	return d, nil
}

// scanTOML finds, for each server of an mcp_servers table, where its
// command and args are; order is the servers in order of appearance.
func scanTOML(src []byte) (order []string, spans map[string]tomlSpans, err error) {
	spans = map[string]tomlSpans{}
	var p unstable.Parser
	p.Reset(src)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			table = keyParts(e.Key())
		case unstable.ArrayTable:
			table = []string{"\x00array"} // nothing of ours lives in one
		case unstable.KeyValue:
			k := keyParts(e.Key())
			full := append(slices.Clone(table), k...)
			if len(full) < 2 || full[0] != "mcp_servers" {
				continue
			}
			name := full[1]
			if !slices.Contains(order, name) {
				order = append(order, name)
			}
			if len(full) != 3 {
				continue
			}
			sp := spans[name]
			first, last := keyRanges(e.Key())
			v := e.Value()
			switch full[2] {
			case "command":
				if v.Kind != unstable.String {
					continue
				}
				sp.found = true
				sp.cmd = span{int(v.Raw.Offset), int(v.Raw.Offset + v.Raw.Length)}
				sp.keyStart, sp.lastKey = first, last.start
			case "args":
				if v.Kind != unstable.Array {
					continue
				}
				sp.argsKey = first
				sp.open = valueStart(src, last.end)
				if sp.open < 0 || src[sp.open] != '[' {
					continue
				}
				sp.elems = nil
				ok := true
				for it := v.Children(); it.Next(); {
					c := it.Node()
					if c.Kind != unstable.String {
						ok = false
						break
					}
					sp.elems = append(sp.elems, span{int(c.Raw.Offset), int(c.Raw.Offset + c.Raw.Length)})
				}
				from := sp.open + 1
				if n := len(sp.elems); n > 0 {
					from = sp.elems[n-1].end
				}
				sp.close = arrayClose(src, from)
				sp.hasArgs = ok && sp.close >= 0
			}
			spans[name] = sp
		}
	}
	if err := p.Error(); err != nil {
		return nil, nil, err
	}
	return order, spans, nil
}

// keyParts is the decoded parts of a (dotted) key.
func keyParts(it unstable.Iterator) []string {
	var out []string
	for it.Next() {
		out = append(out, string(it.Node().Data))
	}
	return out
}

// keyRanges returns where a key's first part starts and its last part's
// range.
func keyRanges(it unstable.Iterator) (first int, last span) {
	first = -1
	for it.Next() {
		r := it.Node().Raw
		if first < 0 {
			first = int(r.Offset)
		}
		last = span{int(r.Offset), int(r.Offset + r.Length)}
	}
	return first, last
}

// valueStart skips the whitespace, '=' and whitespace after a key ending at
// i and returns where the value starts, or -1.
func valueStart(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
		i++
	}
	if i >= len(src) || src[i] != '=' {
		return -1
	}
	i++
	for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
		i++
	}
	if i >= len(src) {
		return -1
	}
	return i
}

// arrayClose returns the ']' closing an array whose last element (or '[')
// ends at i, skipping whitespace, commas and comments; -1 if it finds
// anything else.
func arrayClose(src []byte, i int) int {
	for i = arrayNext(src, i); i < len(src) && src[i] == ','; {
		i = arrayNext(src, i+1)
	}
	if i < len(src) && src[i] == ']' {
		return i
	}
	return -1
}

// arrayNext skips the whitespace, newlines and comments inside an array
// from i and returns where the next token starts.
func arrayNext(src []byte, i int) int {
	for i < len(src) {
		switch src[i] {
		case ' ', '\t', '\r', '\n':
			i++
		case '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		default:
			return i
		}
	}
	return i
}

func (d *tomlDoc) servers() []server { return d.list }

// rewrite applies changes as edits of the command values and args arrays
// (an args line is added after the command's line when there is none).
func (d *tomlDoc) rewrite(changes map[int]change) ([]byte, error) {
	var edits []udiff.Edit
	for i, c := range changes {
		if i >= len(d.list) || !d.spans[i].found {
			return nil, fmt.Errorf("server %d: not found in the source", i)
		}
		e, err := d.entryEdits(d.spans[i], c)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", d.list[i].Name, err)
		}
		edits = append(edits, e...)
	}
	return udiff.ApplyBytes(d.src, edits)
}

func (d *tomlDoc) entryEdits(sp tomlSpans, c change) ([]udiff.Edit, error) {
	src := d.src
	text := func(s span) string { return string(src[s.start:s.end]) }
	oldCmd := text(sp.cmd)
	newCmd := tomlString(c.Command)
	var edits []udiff.Edit
	if c.Drop > 0 {
		if !sp.hasArgs || len(sp.elems) < c.Drop {
			return nil, fmt.Errorf("args has fewer than %d elements", c.Drop)
		}
		if raw := text(sp.elems[c.Drop-1]); tomlDecodes(raw, c.Command) {
			newCmd = raw // the wrapped command keeps its spelling
		}
		switch {
		case len(sp.elems) > c.Drop:
			edits = append(edits, udiff.Edit{Start: sp.elems[0].start, End: sp.elems[c.Drop].start})
		case c.RemoveArgs:
			// Undo the line install added.
			start := bytes.LastIndexByte(src[:sp.argsKey], '\n') + 1
			end := bytes.IndexByte(src[sp.close:], '\n')
			if end < 0 {
				start, end = max(start-1, 0), len(src)
			} else {
				end += sp.close + 1
			}
			edits = append(edits, udiff.Edit{Start: start, End: end})
		default:
			// The elements go, with a trailing comma, and what else
			// the array holds (comments) stays.
			end := sp.elems[c.Drop-1].end
			if j := arrayNext(src, end); j < len(src) && src[j] == ',' {
				end = j + 1
			}
			edits = append(edits, udiff.Edit{Start: sp.elems[0].start, End: end})
		}
	}
	if len(c.Prepend) > 0 {
		parts := make([]string, len(c.Prepend))
		for i, a := range c.Prepend {
			parts[i] = tomlString(a)
			if i == len(c.Prepend)-1 && tomlDecodes(oldCmd, a) {
				parts[i] = oldCmd // the command keeps its spelling
			}
		}
		joined := strings.Join(parts, ", ")
		switch {
		case !sp.hasArgs:
			edits = append(edits, d.argsLine(sp, joined))
		case len(sp.elems) == 0:
			edits = append(edits, udiff.Edit{Start: sp.open + 1, End: sp.open + 1, New: joined})
		default:
			gap := src[sp.open+1 : sp.elems[0].start]
			sep := ", "
			if i := bytes.LastIndexByte(gap, '\n'); i >= 0 {
				indent := gap[i+1:]
				if len(bytes.TrimLeft(indent, " \t")) != 0 {
					indent = nil
				}
				sep = ",\n" + string(indent)
				if i > 0 && gap[i-1] == '\r' {
					sep = ",\r\n" + string(indent)
				}
			}
			edits = append(edits, udiff.Edit{Start: sp.elems[0].start, End: sp.elems[0].start, New: joined + sep})
		}
	}
	edits = append(edits, udiff.Edit{Start: sp.cmd.start, End: sp.cmd.end, New: newCmd})
	return edits, nil
}

// argsLine is an edit adding `args = [joined]` on the line after the
// command's, with the command key's indentation and dotted prefix.
func (d *tomlDoc) argsLine(sp tomlSpans, joined string) udiff.Edit {
	src := d.src
	lineStart := bytes.LastIndexByte(src[:sp.keyStart], '\n') + 1
	indent := string(src[lineStart:sp.keyStart])
	if strings.TrimLeft(indent, " \t") != "" {
		indent = ""
	}
	line := indent + string(src[sp.keyStart:sp.lastKey]) + "args = [" + joined + "]"
	nl := bytes.IndexByte(src[sp.cmd.end:], '\n')
	if nl < 0 {
		return udiff.Edit{Start: len(src), End: len(src), New: "\n" + line}
	}
	at := sp.cmd.end + nl
	eol := "\n"
	if at > 0 && src[at-1] == '\r' {
		eol = "\r\n"
	}
	return udiff.Edit{Start: at + 1, End: at + 1, New: line + eol}
}

// tomlDecodes reports whether raw, a TOML string value, holds s.
func tomlDecodes(raw, s string) bool {
	var v struct{ V string }
	return toml.Unmarshal([]byte("V = "+raw), &v) == nil && v.V == s
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == utf8.RuneError:
			b.WriteString(`\uFFFD`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// redefinition returns where a document that go-toml rejects for meaning
// rather than syntax first defines a key or table a second time (go-toml
// does not say where).
func redefinition(src []byte) (int, bool) {
	const (
		value  = 1 // a key = value
		table  = 2 // a [table] header
		dotted = 3 // a table made by a dotted key
	)
	defined := map[string]int{}
	var p unstable.Parser
	p.Reset(src)
	var prefix []string
	for p.NextExpression() {
		e := p.Expression()
		k := keyParts(e.Key())
		first, _ := keyRanges(e.Key())
		switch e.Kind {
		case unstable.Table:
			name := strings.Join(k, "\x00")
			if kind, ok := defined[name]; ok && kind != 0 {
				return first, true
			}
			defined[name] = table
			prefix = k
		case unstable.ArrayTable:
			prefix = []string{"\x00array", fmt.Sprint(first)}
		case unstable.KeyValue:
			full := append(slices.Clone(prefix), k...)
			for i := len(prefix) + 1; i < len(full); i++ {
				name := strings.Join(full[:i], "\x00")
				if kind := defined[name]; kind == value {
					return first, true
				}
				defined[name] = dotted
			}
			name := strings.Join(full, "\x00")
			if _, ok := defined[name]; ok {
				return first, true
			}
			defined[name] = value
		}
	}
	return 0, false
}

// lineColumn is the 1-based line and column of offset off in src.
func lineColumn(src []byte, off int) (int, int) {
	line := 1 + bytes.Count(src[:off], []byte("\n"))
	return line, off - (bytes.LastIndexByte(src[:off], '\n') + 1) + 1
}
