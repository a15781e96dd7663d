package errtemplate

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
)

// flattenJSON rewrites an error text that is, or ends with, a JSON object
// or array (an HTTP API's error body, a validator's list of issues) as
// "path: value" pairs in document order, so that templates are mined from
// the message, code, type and failing field inside the body instead of
// its punctuation: `{"error": {"code": 404, "message": "Not found"}}`
// reads "error.code: 404 error.message: Not found". Keys stay as they are;
// a one-word string value (a code, a field name, an id) is written
// between double quotes, a value to mask unless a caller keeps it, and a
// longer one as its words, brackets inside strings as parentheses. Any text before the body is kept. Other texts,
// and bodies that do not parse to the end, are returned as they are.
func flattenJSON(text string) string {
	start := strings.IndexAny(text, "{[")
	if start < 0 || len(text) > maxJSONText {
		return text
	}
	body := strings.TrimSpace(text[start:])
	if !json.Valid([]byte(body)) {
		return text
	}
	var b strings.Builder
	b.WriteString(text[:start])
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.UseNumber()
	walkJSON(dec, "", &b)
	return strings.TrimSpace(b.String())
}

// maxJSONText is the longest text flattenJSON parses.
const maxJSONText = 64 << 10

// oneWord matches a string value written as one quoted token.
var oneWord = regexp.MustCompile(`^[\w.@:/+-]+$`)

// walkJSON writes the value dec is at, at path, and returns false when the
// stream ends early.
func walkJSON(dec *json.Decoder, path string, b *strings.Builder) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			for dec.More() {
				k, err := dec.Token()
				key, ok := k.(string)
				if err != nil || !ok {
					return false
				}
				p := brackets.Replace(key)
				if path != "" {
					p = path + "." + key
				}
				if !walkJSON(dec, p, b) {
					return false
				}
			}
		case '[':
			for dec.More() {
				if !walkJSON(dec, path+"[]", b) {
					return false
				}
			}
		}
		_, err := dec.Token() // the closing delimiter
		return err == nil
	case string:
		writePair(b, path, jsonString(t))
	case json.Number:
		writePair(b, path, t.String())
	case bool:
		writePair(b, path, map[bool]string{true: "true", false: "false"}[t])
	case nil:
		writePair(b, path, "null")
	}
	return true
}

// brackets turns the brackets inside a body's strings into parentheses,
// so that a flattened text never holds a body to flatten again.
var brackets = strings.NewReplacer("{", "(", "[", "(", "}", ")", "]", ")")

// jsonString is how a string value of a body reads in the flattened text.
func jsonString(s string) string {
	s = brackets.Replace(strings.Join(strings.Fields(s), " "))
	if s == "" || oneWord.MatchString(s) {
		return `"` + s + `"`
	}
	return s
}

func writePair(b *strings.Builder, path, value string) {
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	if path != "" {
		b.WriteString(path)
		b.WriteString(": ")
	}
	b.WriteString(value)
}
