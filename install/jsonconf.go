package install

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tailscale/hujson"
)

// jsonDoc is a JSON configuration (comments and trailing commas allowed,
// as VS Code's JSONC has them), parsed with hujson so that packing it again
// gives back the input byte for byte.
type jsonDoc struct {
	format string
	path   string
	src    []byte
	list   []server
}

func parseJSON(format, path string, src []byte) (*jsonDoc, error) {
	d := &jsonDoc{format: format, path: path, src: src}
	root, err := hujson.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if _, ok := root.Value.(*hujson.Object); !ok {
		return nil, fmt.Errorf("parse %s: line 1: the top level is not an object", path)
	}
	for _, e := range collectJSON(format, &root) {
		d.list = append(d.list, e.s)
	}
	return d, nil
}

type jsonFound struct {
	s   server
	obj *hujson.Object // nil when the entry is not an object
}

// collectJSON finds the server entries of root, a parsed file of the
// format.
func collectJSON(format string, root *hujson.Value) []jsonFound {
	top := root.Value.(*hujson.Object)
	var out []jsonFound
	list := func(where string, obj *hujson.Object) {
		for i := range obj.Members {
			m := &obj.Members[i]
			out = append(out, readJSONServer(where, literal(m.Name), &m.Value))
		}
	}
	switch format {
	case FormatVSCode:
		if o := objectAt(top, "servers"); o != nil {
			list("servers", o)
		}
	case FormatClaudeCode:
		if o := objectAt(top, "mcpServers"); o != nil {
			list("mcpServers", o)
		}
		if projects := objectAt(top, "projects"); projects != nil {
			for i := range projects.Members {
				p, ok := projects.Members[i].Value.Value.(*hujson.Object)
				if !ok {
					continue
				}
				if o := objectAt(p, "mcpServers"); o != nil {
					list(fmt.Sprintf("projects[%s].mcpServers", projects.Members[i].Name.Value), o)
				}
			}
		}
	default:
		if o := objectAt(top, "mcpServers"); o != nil {
			list("mcpServers", o)
		}
	}
	return out
}

// readJSONServer reads the entry name: v in the list where.
func readJSONServer(where, name string, v *hujson.Value) jsonFound {
	s := server{Where: where, Name: name}
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		s.Skip = "not an object"
		return jsonFound{s: s}
	}
	str := func(key string) string {
		if i := memberIndex(obj, key); i >= 0 {
			if lit, ok := obj.Members[i].Value.Value.(hujson.Literal); ok && lit.Kind() == '"' {
				return lit.String()
			}
		}
		return ""
	}
	typ := str("type")
	s.Command = str("command")
	s.URL = str("url")
	if s.URL == "" {
		s.URL = str("serverUrl") // Windsurf
	}
	s.Transport = transport(typ, s.Command, s.URL)
	if s.Transport != "stdio" {
		if s.Transport == "" {
			s.Skip = "neither a command nor a URL"
			if typ != "" {
				s.Skip = fmt.Sprintf("unknown type %q", typ)
			}
		}
		return jsonFound{s: s, obj: obj}
	}
	if s.Command == "" {
		s.Skip = "no command"
		return jsonFound{s: s, obj: obj}
	}
	if i := memberIndex(obj, "args"); i >= 0 {
		arr, ok := obj.Members[i].Value.Value.(*hujson.Array)
		if !ok {
			s.Skip = "args is not a list"
			return jsonFound{s: s, obj: obj}
		}
		s.Args = []string{}
		for _, e := range arr.Elements {
			lit, ok := e.Value.(hujson.Literal)
			if !ok || lit.Kind() != '"' {
				s.Skip = "args is not a list of strings"
				return jsonFound{s: s, obj: obj}
			}
			s.Args = append(s.Args, lit.String())
		}
	}
	return jsonFound{s: s, obj: obj}
}

// transport names an entry's transport from its type, command and URL.
func transport(typ, command, url string) string {
	switch strings.ToLower(typ) {
	case "stdio":
		return "stdio"
	case "http", "streamable-http", "streamablehttp", "streamable_http":
		return "http"
	case "sse":
		return "sse"
	case "":
	default:
		return ""
	}
	switch {
	case command != "":
		return "stdio"
	case strings.HasSuffix(strings.TrimRight(url, "/"), "/sse"):
		return "sse"
	case url != "":
		return "http"
	}
	return ""
}

func (d *jsonDoc) servers() []server { return d.list }

// rewrite applies changes to a fresh parse of the source and packs it:
// only the command values and the args arrays of the changed entries
// differ from the source.
func (d *jsonDoc) rewrite(changes map[int]change) ([]byte, error) {
	root, err := hujson.Parse(d.src)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", d.path, err)
	}
	found := collectJSON(d.format, &root)
	for i, c := range changes {
		if i >= len(found) || found[i].obj == nil {
			return nil, fmt.Errorf("server %d: not an object", i)
		}
		if err := rewriteJSONEntry(found[i].obj, c); err != nil {
			return nil, fmt.Errorf("server %q: %w", found[i].s.Name, err)
		}
	}
	return root.Pack(), nil
}

// rewriteJSONEntry applies c to an entry: the command's value is replaced,
// and the args array loses its first c.Drop elements and gains c.Prepend in
// front, laid out like its first element (or, when the entry has no args,
// a new "args" member follows "command" on a line of its own).
func rewriteJSONEntry(obj *hujson.Object, c change) error {
	ci := memberIndex(obj, "command")
	if ci < 0 {
		return fmt.Errorf("no command")
	}
	cmd := &obj.Members[ci].Value
	oldCmd, _ := cmd.Value.(hujson.Literal)
	var newCmd hujson.Literal = hujson.String(c.Command)

	ai := memberIndex(obj, "args")
	var arr *hujson.Array
	if ai >= 0 {
		arr = obj.Members[ai].Value.Value.(*hujson.Array)
	}
	if c.Drop > 0 {
		if arr == nil || len(arr.Elements) < c.Drop {
			return fmt.Errorf("args has fewer than %d elements", c.Drop)
		}
		// The wrapped command keeps its spelling.
		if lit, ok := arr.Elements[c.Drop-1].Value.(hujson.Literal); ok && lit.String() == c.Command {
			newCmd = lit
		}
		before := arr.Elements[0].BeforeExtra
		arr.Elements = arr.Elements[c.Drop:]
		if len(arr.Elements) > 0 {
			arr.Elements[0].BeforeExtra = before
		}
		if c.RemoveArgs && len(arr.Elements) == 0 {
			// Undo the member install added after "command".
			if ai == len(obj.Members)-1 && ai > 0 && obj.Members[ai].Value.AfterExtra != nil {
				obj.Members[ai-1].Value.AfterExtra = obj.Members[ai].Value.AfterExtra
			}
			obj.Members = append(obj.Members[:ai], obj.Members[ai+1:]...)
			if ci > ai {
				ci--
			}
			cmd = &obj.Members[ci].Value
		}
	}
	cmd.Value = newCmd
	if len(c.Prepend) > 0 {
		elems := make([]hujson.Value, len(c.Prepend))
		for i, a := range c.Prepend {
			elems[i].Value = hujson.String(a)
			if i == len(c.Prepend)-1 && oldCmd != nil && oldCmd.String() == a {
				elems[i].Value = oldCmd // the command keeps its spelling
			}
			if i > 0 {
				elems[i].BeforeExtra = hujson.Extra(" ")
			}
		}
		switch {
		case arr == nil:
			m := hujson.ObjectMember{
				Name:  hujson.Value{BeforeExtra: lineBreak(obj.Members[ci].Name.BeforeExtra), Value: hujson.String("args")},
				Value: hujson.Value{BeforeExtra: clone(cmd.BeforeExtra), Value: &hujson.Array{Elements: elems}},
			}
			if ci == len(obj.Members)-1 && cmd.AfterExtra != nil {
				// Keep a trailing comma after what is now the last member.
				m.Value.AfterExtra, cmd.AfterExtra = cmd.AfterExtra, nil
			}
			obj.Members = append(obj.Members[:ci+1], append([]hujson.ObjectMember{m}, obj.Members[ci+1:]...)...)
		case len(arr.Elements) == 0:
			arr.Elements = elems
		default:
			first := &arr.Elements[0]
			elems[0].BeforeExtra = first.BeforeExtra
			if !bytes.Contains(first.BeforeExtra, []byte("\n")) {
				first.BeforeExtra = hujson.Extra(" ")
			}
			arr.Elements = append(elems, arr.Elements...)
		}
	}
	return nil
}

// lineBreak returns the line break and indentation at the end of extra (the
// whitespace before a member), or a space when it has no line break.
func lineBreak(extra hujson.Extra) hujson.Extra {
	i := bytes.LastIndexByte(extra, '\n')
	if i < 0 {
		return hujson.Extra(" ")
	}
	indent := extra[i+1:]
	if len(bytes.TrimLeft(indent, " \t")) != 0 {
		indent = nil
	}
	nl := "\n"
	if i > 0 && extra[i-1] == '\r' {
		nl = "\r\n"
	}
	return hujson.Extra(nl + string(indent))
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// memberIndex is the index of obj's last member named name (the one a
// JSON decoder keeps), or -1.
func memberIndex(obj *hujson.Object, name string) int {
	for i := len(obj.Members) - 1; i >= 0; i-- {
		if literal(obj.Members[i].Name) == name {
			return i
		}
	}
	return -1
}

// objectAt is the object value of obj's member name, or nil.
func objectAt(obj *hujson.Object, name string) *hujson.Object {
	if i := memberIndex(obj, name); i >= 0 {
		o, _ := obj.Members[i].Value.Value.(*hujson.Object)
		return o
	}
	return nil
}

// literal is the string a member name or string value holds.
func literal(v hujson.Value) string {
	if lit, ok := v.Value.(hujson.Literal); ok && lit.Kind() == '"' {
		return lit.String()
	}
	return ""
}

// parse parses a configuration file of the format.
func parse(format, path string, src []byte) (document, error) {
	if format == FormatCodex {
		return parseTOML(path, src)
	}
	return parseJSON(format, path, src)
}
