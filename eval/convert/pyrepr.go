package convert

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyCallResult reads the Python repr of an MCP client's CallToolResult,
// as some harnesses log it:
//
//	meta=None content=[TextContent(type='text', text='...')] isError=False
//
// It returns the texts of the text blocks, one a line, and the isError
// flag.
func pyCallResult(s string) (text string, isError bool, err error) {
	const flag = " isError="
	i := strings.LastIndex(s, flag)
	if i < 0 || !strings.HasPrefix(s, "meta=") {
		return "", false, errors.New("not a CallToolResult repr")
	}
	switch s[i+len(flag):] {
	case "True":
		isError = true
	case "False":
	default:
		return "", false, errors.New("isError is neither True nor False")
	}
	body := s[:i]
	var texts []string
	for {
		j := strings.Index(body, "text=")
		if j < 0 {
			break
		}
		body = body[j+len("text="):]
		if body == "" || (body[0] != '\'' && body[0] != '"') {
			continue
		}
		t, rest, err := pyString(body)
		if err != nil {
			return "", false, err
		}
		texts = append(texts, t)
		body = rest
	}
	return strings.Join(texts, "\n"), isError, nil
}

// pyString reads the Python string literal at the start of s (quoted with
// ' or ", with Python's backslash escapes) and returns its value and what
// follows it.
func pyString(s string) (string, string, error) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", s, errors.New("no string literal")
	}
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		switch {
		case c == q:
			return b.String(), s[i+1:], nil
		case c != '\\':
			b.WriteByte(c)
			i++
			continue
		case i+1 >= len(s):
			return "", s, errors.New("unterminated escape")
		}
		e := s[i+1]
		i += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(s) {
				return "", s, errors.New("short escape")
			}
			v, err := strconv.ParseUint(s[i:i+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", s, errors.New("bad escape")
			}
			b.WriteRune(rune(v))
			i += n
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", s, errors.New("unterminated string literal")
}
