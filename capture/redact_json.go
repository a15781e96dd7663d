package capture

import (
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight/wire"
)

// leaf is one JSON string (or a number under a sensitive key) to redact.
type leaf struct {
	start, end int    // byte range of the token in the document
	key        string // the member's key, "" in arrays and for keys
	value      string // decoded string
	sensitive  string // rule id when under a sensitive key
	isKey      bool
	isNumber   bool
	plumbing   bool // a progress token or cursor: scanned without its key, so "token" gives no context
}

// isKeyAt reports whether the string token of a valid JSON document that
// ends just before doc[i] is an object's key: a colon follows it.
func isKeyAt(doc []byte, i int) bool {
	for ; i < len(doc); i++ {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}

// redactJSON redacts a valid JSON document, keeping its layout: only the
// tokens that change are rewritten.
func (r *Redactor) redactJSON(doc []byte, depth int, seen found) ([]byte, int) {
	buf := leafPool.Get().(*[]leaf)
	leaves := r.collect((*buf)[:0], doc)
	defer func() {
		if cap(leaves) > maxPooledLeaves {
			return // a rare huge document's slice is left to the GC
		}
		clear(leaves) // drop the strings before the slice is reused
		*buf = leaves[:0]
		leafPool.Put(buf)
	}()
	if len(leaves) == 0 {
		return doc, 0
	}
	// One gitleaks pass over all values, each line "key: value", gives
	// the rules their context at the cost of a single scan.
	var frag strings.Builder
	frag.Grow(fragSize(leaves))
	for _, l := range leaves {
		if l.sensitive != "" || l.isNumber || len(l.value) < 4 {
			continue
		}
		if l.key != "" && !l.plumbing {
			frag.WriteString(l.key)
			frag.WriteString(": ")
		}
		frag.WriteString(l.value)
		frag.WriteByte('\n')
	}
	fragLen := frag.Len()
	// The built-in rules' keywords are looked for once in every text they
	// may run on (the keys below a sensitive member are redacted as text
	// too but not scanned by gitleaks).
	for _, l := range leaves {
		if l.isKey && l.sensitive != "" && len(l.value) >= minSecretLen {
			frag.WriteString(l.value)
			frag.WriteByte('\n')
		}
	}
	kw := r.keywords.find(frag.String(), 0)
	secrets := r.scan(frag.String()[:fragLen], kw)
	var out []byte // made at the first change: most documents have none
	last, total := 0, 0
	for _, l := range leaves {
		var repl string
		var n int
		switch {
		case l.sensitive != "" && !l.isKey:
			if l.value == Placeholder(l.sensitive) || (!l.isNumber && l.value == "") {
				continue
			}
			seen.add(l.value, l.sensitive)
			repl, n = Placeholder(l.sensitive), 1
		default:
			repl, n = r.redactValue(l.value, secrets, depth, seen, kw)
		}
		if n == 0 {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(doc)+64)
		}
		out = append(out, doc[last:l.start]...)
		out = wire.AppendPlainString(out, repl)
		last = l.end
		total += n
	}
	if total == 0 {
		return doc, 0
	}
	out = append(out, doc[last:]...)
	return out, total
}

// leafPool holds the leaf slices of redactJSON, one per document being
// redacted (documents nested in strings take their own).
var leafPool = sync.Pool{New: func() any { return new([]leaf) }}

// maxPooledLeaves caps the slices kept in leafPool.
const maxPooledLeaves = 4096

// fragSize is the length of the text redactJSON gives gitleaks and the
// keyword search for leaves, so that it is built in one allocation.
func fragSize(leaves []leaf) int {
	n := 0
	for _, l := range leaves {
		switch {
		case l.sensitive == "" && !l.isNumber && len(l.value) >= 4:
			if l.key != "" && !l.plumbing {
				n += len(l.key) + 2
			}
			n += len(l.value) + 1
		case l.isKey && l.sensitive != "" && len(l.value) >= minSecretLen:
			n += len(l.value) + 1
		}
	}
	return n
}

// redactValue redacts one decoded string: as JSON when it holds a JSON
// object or array, else as text. A finding that spans more than the string
// (its key was part of the match) replaces the whole string.
func (r *Redactor) redactValue(v string, secrets []finding, depth int, seen found, present uint64) (string, int) {
	if t := strings.TrimSpace(v); depth < maxJSONDepth && len(t) > 1 && (t[0] == '{' || t[0] == '[') && wire.Valid(wire.BytesView(t)) {
		out, n := r.redactJSON([]byte(v), depth+1, seen)
		return string(out), n
	}
	for _, f := range secrets {
		if len(v) >= minSecretLen && !strings.Contains(v, f.secret) && strings.Contains(f.secret, v) {
			seen.add(v, f.id)
			return Placeholder(f.id), 1
		}
	}
	return r.redactText(v, secrets, seen, present)
}

// frame is an open object or array while collecting leaves.
type frame struct {
	object    bool
	expectKey bool
	key       string
	sensitive string // inherited rule id
	schema    bool   // inside a JSON Schema
}

// schemaKeys are the MCP members whose values are JSON Schemas.
var schemaKeys = map[string]bool{"inputSchema": true, "outputSchema": true, "requestedSchema": true}

// collect walks a valid JSON document and appends its string tokens (and
// the numbers below sensitive keys) in order to leaves.
func (r *Redactor) collect(leaves []leaf, doc []byte) []leaf {
	var stack []frame
	// valueSensitive is the rule id applying to the value about to start.
	valueSensitive := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := &stack[len(stack)-1]
		if top.schema {
			return "" // property names in a JSON Schema hold no secrets
		}
		if top.object {
			if id := r.sensitiveKey(top.key); id != "" {
				return id
			}
		}
		return top.sensitive
	}
	// inSchema reports whether the value about to start is (inside) a JSON
	// Schema: tools/list input and output schemas, elicitation's
	// requestedSchema. Key names are not secrets there ("password":
	// {"type": "string"}); gitleaks and the text rules still apply.
	inSchema := func() bool {
		if len(stack) == 0 {
			return false
		}
		top := stack[len(stack)-1]
		return top.schema || top.object && schemaKeys[top.key]
	}
	currentKey := func() string {
		if len(stack) == 0 || !stack[len(stack)-1].object {
			return ""
		}
		return stack[len(stack)-1].key
	}
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch c {
		case '{', '[':
			stack = append(stack, frame{object: c == '{', expectKey: c == '{', sensitive: valueSensitive(), schema: inSchema()})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].expectKey = true
			}
		case '"':
			end := stringEnd(doc, i)
			raw := doc[i : end+1]
			val := decodeJSONString(raw)
			if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].expectKey {
				top := &stack[len(stack)-1]
				top.key, top.expectKey = val, false
				// A key is redacted as text (a map may be keyed by a
				// secret), but not the protocol's own names
				// ("progressToken", "nextCursor"): those would only wake
				// the rules keyed on "token" in every request.
				if len(val) >= minSecretLen && !notSensitive[normalizeKey(val)] {
					leaves = append(leaves, leaf{start: i, end: end + 1, value: val, isKey: true, sensitive: top.sensitive})
				}
			} else {
				k := currentKey()
				leaves = append(leaves, leaf{start: i, end: end + 1, key: k, value: val, sensitive: valueSensitive(),
					plumbing: k != "" && notSensitive[normalizeKey(k)]})
			}
			i = end
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			j := i
			for j < len(doc) && strings.IndexByte("+-.eE0123456789", doc[j]) >= 0 {
				j++
			}
			if id := valueSensitive(); id != "" {
				leaves = append(leaves, leaf{start: i, end: j, key: currentKey(), value: string(doc[i:j]), sensitive: id, isNumber: true})
			}
			i = j - 1
		}
	}
	return leaves
}
