package capture

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight/wire"
)

// verdict is what scanJSON learnt of a document.
type verdict uint8

const (
	// docClean is valid JSON that redactJSON leaves as it is.
	docClean verdict = iota
	// docDirty holds a sensitive key or a keyword; whether it is valid
	// JSON is not known (the scan stopped there).
	docDirty
	// docInvalid is not valid JSON (wire.Valid would say so).
	docInvalid
)

// cleanJSON reports whether doc, a valid JSON document, holds nothing
// redactJSON could change (see scanJSON).
func (r *Redactor) cleanJSON(doc []byte, depth int, searched bool) bool {
	return r.scanJSON(doc, depth, searched) == docClean
}

// scanJSON validates doc as wire.Valid does and, in the same pass, looks
// for what redactJSON could change: a sensitive key, or a keyword of
// gitleaks or of a built-in text rule in any key or string (strings
// holding JSON are looked into too, as redactJSON does). Every rule needs
// one of those to fire, so a clean document, which is most of them, costs
// one pass that allocates nothing (but the decoding of strings with "\u"
// escapes or non-ASCII text; strings holding a document are decoded into
// pooled buffers) instead of a validation, the leaf collection, the text built for
// gitleaks and its scan. User patterns run on every text, so a Redactor
// with any does not ask.
//
// redactJSON looks for keywords in its leaves joined as "key: value" lines;
// looking in each string alone finds the same ones, since no keyword holds
// a line break or ": " or begins with a space or ends with a colon
// (keywordsIndex checks).
//
// searched says doc's whole text was searched for keywords already, and
// holds none (a document held in a string): its plain strings, which are
// pieces of that text, are not searched again.
func (r *Redactor) scanJSON(doc []byte, depth int, searched bool) verdict {
	var stackBuf [32]byte
	stack := stackBuf[:0] // the open containers: '{' or '['
	v := docClean
	for i := wire.SkipSpace(doc, 0); ; {
		// A value starts at doc[i].
		if i >= len(doc) {
			return docInvalid
		}
		switch c := doc[i]; c {
		case '{', '[':
			if len(stack)+1 > wire.MaxNesting {
				return docInvalid
			}
			i = wire.SkipSpace(doc, i+1)
			if i < len(doc) && doc[i] == c+2 { // '}' and ']' follow '{' and '[' by two
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i, v = r.scanKey(doc, i, searched); v != docClean {
					return v
				}
			}
			continue
		case '"':
			if i, v = r.scanValue(doc, i, depth, searched); v != docClean {
				return v
			}
		default: // a literal or a number
			var ok bool
			if i, ok = wire.SkipValue(doc, i, 0); !ok {
				return docInvalid
			}
		}
		// After a value: close containers, or go on to the next element.
		for {
			i = wire.SkipSpace(doc, i)
			if len(stack) == 0 {
				if i != len(doc) {
					return docInvalid
				}
				return docClean
			}
			if i >= len(doc) {
				return docInvalid
			}
			top := stack[len(stack)-1]
			if doc[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if doc[i] != ',' {
				return docInvalid
			}
			i = wire.SkipSpace(doc, i+1)
			if top == '{' {
				if i, v = r.scanKey(doc, i, searched); v != docClean {
					return v
				}
			}
			break
		}
	}
}

// scanKey checks the object key at doc[i] and its colon; it returns the
// index of the member's value.
func (r *Redactor) scanKey(doc []byte, i int, searched bool) (int, verdict) {
	if i >= len(doc) || doc[i] != '"' {
		return i, docInvalid
	}
	end, kind, ok := r.keywords.scanToken(doc, i)
	if !ok {
		return end, docInvalid
	}
	if kind == plainText {
		if s := wire.StringView(doc[i+1 : end]); !r.commonKeys.has(s) && !r.keyClean(s, searched, true) {
			return end, docDirty
		}
	} else if !r.keyClean(decodeJSONString(doc[i:end+1]), searched, false) {
		return end, docDirty
	}
	i = wire.SkipSpace(doc, end+1)
	if i >= len(doc) || doc[i] != ':' {
		return i, docInvalid
	}
	return wire.SkipSpace(doc, i+1), docClean
}

// scanValue checks the string value at doc[i]; it returns the index just
// after it.
func (r *Redactor) scanValue(doc []byte, i, depth int, searched bool) (int, verdict) {
	end, kind, ok := r.keywords.scanToken(doc, i)
	if !ok {
		return end, docInvalid
	}
	body := doc[i+1 : end]
	var s string
	switch kind {
	case escapedText:
		// Searched as it stands (see escapedText), which finds every
		// keyword of its value, and decoded only if it may hold a
		// document.
		if r.keywords.findASCII(wire.StringView(body), 0) != 0 {
			return end, docDirty
		}
		if depth >= maxJSONDepth || !mayHoldJSON(body) {
			return end + 1, docClean
		}
		buf := unescapePool.Get().(*[]byte)
		t := unescapeASCII((*buf)[:0], body)
		v := r.scanNested(t, depth)
		if cap(t) <= maxPooledUnescape {
			*buf = t
			unescapePool.Put(buf)
		}
		return end + 1, v
	case plainText:
		s = wire.StringView(body)
	default:
		s = decodeJSONString(doc[i : end+1])
	}
	if !(kind == plainText && searched) && r.keywords.findText(s, kind == plainText) != 0 {
		return end, docDirty
	}
	return end + 1, r.scanNested(wire.BytesView(s), depth)
}

// asciiSpace marks the ASCII bytes strings.TrimSpace trims.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// unescapePool holds the buffers scanValue decodes escapedText values
// into, one per document being scanned (nested ones take their own).
var unescapePool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledUnescape caps the buffers kept in unescapePool.
const maxPooledUnescape = 64 << 10

// scanNested looks into the decoded string value v when it holds a JSON
// document; it returns docDirty only for a valid one that is not clean,
// and docClean otherwise (v was searched as text already).
func (r *Redactor) scanNested(v []byte, depth int) verdict {
	if len(v) < 2 || v[0] < utf8.RuneSelf && v[0] != '{' && v[0] != '[' && !asciiSpace[v[0]] {
		return docClean // most strings: TrimSpace would leave their first byte
	}
	t := wire.BytesView(strings.TrimSpace(wire.StringView(v)))
	if depth >= maxJSONDepth || len(t) < 2 || t[0] != '{' && t[0] != '[' {
		return docClean
	}
	// A dirty verdict may come before the scan learns that t is not JSON,
	// which is then only text (searched already).
	if r.scanJSON(t, depth+1, true) == docDirty && wire.Valid(t) {
		return docDirty
	}
	return docClean
}
