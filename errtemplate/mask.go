package errtemplate

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Wildcard stands for a variable part of an error text in a template.
const Wildcard = "<*>"

const (
	// openPunct may precede a token's core; it is kept and not masked.
	openPunct = "([{"
	// closePunct may follow a token's core; it is kept and not masked.
	closePunct = ")]},;:.!?"
)

// quotePairs are the quotes that delimit a quoted value.
var quotePairs = [...]struct{ open, close rune }{
	{'\'', '\''}, {'"', '"'}, {'`', '`'}, {'“', '”'}, {'‘', '’'}, {'«', '»'},
}

// Tokens splits text into tokens. A text that is, or ends with, a JSON
// body is read flattened first: "path: value" pairs (flattenJSON). Tokens are separated by white space
// (unicode.IsSpace); punctuation stays attached to its token, and Mask masks
// only a token's core, between leading "([{", quotes and trailing ")]},;:.!?".
// A quoted value is one token even when it holds spaces: a token that starts
// with a quote (after optional "([{" and an optional "key=") runs to the first
// matching closing quote that is followed, after optional ")]},;:.!?", by white
// space or the end of text; without such a quote it ends at white space as
// usual. Invalid UTF-8 is replaced by U+FFFD first. Joining the tokens with
// single spaces and tokenizing again gives the same tokens; empty or all-space
// text gives none.
func Tokens(text string) []string { return tokens(text, -1) }

// Mask returns text with each variable token core replaced by Wildcard and
// the tokens joined by single spaces. Variable are: quoted values (the whole
// quoted run), cores holding a digit (numbers, amounts, ids like KA7I60 or
// gift_card_6276644, uuids, dates, times, IP addresses, 0x… hex), URLs (with
// "://" or starting "www."), e-mail addresses (an '@' inside the core), paths
// (starting "/", "\", "~/", "./", "../" or "C:\", or with a '/' or '\' before
// a last element with a dot extension), hex of 12 or more letters, and cores
// already holding Wildcard. For key=value cores only the value is masked. Kept
// are plain words: letters, '_', '-', apostrophes, so reservation_id and don't
// stay. One exception keeps meaning: a three-digit HTTP status code (100-599)
// right after a kept "HTTP", "status" or "code" (or as the value of status=)
// is kept, so a 401 and a 404 stay apart. Mask is idempotent.
func Mask(text string) string { return strings.Join(maskTokens(text, -1), " ") }

// maskTokens returns the masked tokens of text, at most limit of them when
// limit >= 0.
func maskTokens(text string, limit int) []string {
	toks := tokens(text, limit)
	status := false
	for i, t := range toks {
		m, masked := maskToken(t, status)
		status = !masked && isStatusWord(t)
		toks[i] = m
	}
	return toks
}

// tokens is Tokens, stopping after limit tokens when limit >= 0.
func tokens(text string, limit int) []string {
	text = flattenJSON(strings.ToValidUTF8(text, "\uFFFD"))
	var out []string
	f := closerFinder{s: text}
	for i := range f.at {
		f.at[i] = -1
	}
	for i := 0; i < len(text) && (limit < 0 || len(out) < limit); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			i += n
			continue
		}
		end, ok := f.quotedRun(i)
		if !ok {
			end = plainEnd(text, i)
		}
		out = append(out, text[i:end])
		i = end
	}
	return out
}

// plainEnd returns where the token starting at i ends: at white space or the
// end of s.
func plainEnd(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			return i
		}
		i += n
	}
	return i
}

// closerFinder finds closing quotes in s. Token starts only move forward, so it
// remembers, per kind of quote, the last closing quote found (at, end) or that
// there is none left (none): tokenizing stays linear in len(s).
type closerFinder struct {
	s    string
	at   [len(quotePairs)]int
	end  [len(quotePairs)]int
	none [len(quotePairs)]bool
}

// quotedRun reports whether the token starting at i is a quoted run, and
// where it ends.
func (f *closerFinder) quotedRun(i int) (int, bool) {
	s := f.s
	j := i
	for j < len(s) && strings.IndexByte(openPunct, s[j]) >= 0 {
		j++
	}
	if k := keyLen(s[j:]); k > 0 {
		j += k + 1
	}
	r, n := utf8.DecodeRuneInString(s[j:])
	q := openQuote(r)
	if n == 0 || q < 0 {
		return 0, false
	}
	return f.closer(q, j+n)
}

// closer returns the end of the quoted run whose closing quote of kind q is the
// first valid one at or after from.
func (f *closerFinder) closer(q, from int) (int, bool) {
	if f.none[q] {
		return 0, false
	}
	if f.at[q] >= from {
		return f.end[q], true
	}
	s, c := f.s, quotePairs[q].close
	for k := from; k < len(s); {
		idx := strings.IndexRune(s[k:], c)
		if idx < 0 {
			break
		}
		p := k + idx
		after := p + utf8.RuneLen(c)
		if e, ok := boundary(s, after); ok {
			f.at[q], f.end[q] = p, e
			return e, true
		}
		k = after
	}
	f.none[q] = true
	return 0, false
}

// boundary reports whether a token may end at p, after optional closing
// punctuation, and where.
func boundary(s string, p int) (int, bool) {
	for p < len(s) && strings.IndexByte(closePunct, s[p]) >= 0 {
		p++
	}
	if p == len(s) {
		return p, true
	}
	r, _ := utf8.DecodeRuneInString(s[p:])
	return p, unicode.IsSpace(r)
}

// openQuote returns the index in quotePairs of the quote r opens, or -1.
func openQuote(r rune) int {
	for i, p := range quotePairs {
		if p.open == r {
			return i
		}
	}
	return -1
}

// isQuoteRune reports whether r opens or closes a quote.
func isQuoteRune(r rune) bool {
	for _, p := range quotePairs {
		if p.open == r || p.close == r {
			return true
		}
	}
	return false
}

// keyLen returns the length of the key when s starts with "key=", a key
// being letters, '_', '-' and '.'; else 0.
func keyLen(s string) int {
	for i, r := range s {
		if r == '=' {
			return i
		}
		if !unicode.IsLetter(r) && r != '_' && r != '-' && r != '.' {
			return 0
		}
	}
	return 0
}

// splitPunct splits tok into leading "([{", core and trailing ")]},;:.!?".
func splitPunct(tok string) (lead, core, trail string) {
	i := 0
	for i < len(tok) && strings.IndexByte(openPunct, tok[i]) >= 0 {
		i++
	}
	j := len(tok)
	for j > i && strings.IndexByte(closePunct, tok[j-1]) >= 0 {
		j--
	}
	return tok[:i], tok[i:j], tok[j:]
}

// maskToken returns tok with its core masked when the core is variable, and
// whether it did. afterStatus tells that the previous token is a kept status
// word, so a status code is kept.
func maskToken(tok string, afterStatus bool) (string, bool) {
	lead, core, trail := splitPunct(tok)
	if core == "" {
		return tok, false
	}
	if isQuoted(core) {
		return lead + Wildcard + trail, true
	}
	if k := keyLen(core); k > 0 && k < len(core)-1 {
		key := core[:k]
		if m, ok := maskValue(core[k+1:], isStatusKey(key)); ok {
			return lead + key + "=" + m + trail, true
		}
		return tok, false
	}
	if m, ok := maskValue(core, afterStatus); ok {
		return lead + m + trail, true
	}
	return tok, false
}

// maskValue returns v masked, keeping unmatched quotes around it, and whether v
// is variable.
func maskValue(v string, afterStatus bool) (string, bool) {
	if isQuoted(v) {
		return Wildcard, true
	}
	i := 0
	for i < len(v) {
		r, n := utf8.DecodeRuneInString(v[i:])
		if !isQuoteRune(r) {
			break
		}
		i += n
	}
	j := len(v)
	for j > i {
		r, n := utf8.DecodeLastRuneInString(v[i:j])
		if !isQuoteRune(r) {
			break
		}
		j -= n
	}
	inner := v[i:j]
	if inner == "" || (afterStatus && isStatusCode(inner)) || !variable(inner) {
		return v, false
	}
	return v[:i] + Wildcard + v[j:], true
}

// isQuoted reports whether s is one quoted value, quotes included.
func isQuoted(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	q := openQuote(r)
	if q < 0 {
		return false
	}
	c := quotePairs[q].close
	return len(s) >= n+utf8.RuneLen(c) && strings.HasSuffix(s, string(c))
}

// variable reports whether a core without punctuation or quotes around it is
// variable by its shape.
func variable(s string) bool {
	if strings.Contains(s, Wildcard) {
		return true
	}
	for _, r := range s {
		if unicode.IsDigit(r) {
			return true
		}
	}
	if strings.Contains(s, "://") || (len(s) > 4 && strings.EqualFold(s[:4], "www.")) {
		return true
	}
	if at := strings.IndexByte(s, '@'); at > 0 && at < len(s)-1 {
		return true
	}
	return isPath(s) || (len(s) >= 12 && isHex(s))
}

// isPath reports whether s looks like a file path.
func isPath(s string) bool {
	if len(s) > 1 && (s[0] == '/' || s[0] == '\\') {
		return true
	}
	if strings.HasPrefix(s, "~/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") {
		return true
	}
	if len(s) >= 3 && (s[0]|0x20 >= 'a' && s[0]|0x20 <= 'z') && s[1] == ':' && (s[2] == '\\' || s[2] == '/') {
		return true
	}
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		base := s[i+1:]
		dot := strings.LastIndexByte(base, '.')
		return dot > 0 && dot < len(base)-1
	}
	return false
}

// isHex reports whether s is made of hexadecimal digits only.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isStatusCode reports whether s is an HTTP status code, 100 to 599.
func isStatusCode(s string) bool {
	return len(s) == 3 && s[0] >= '1' && s[0] <= '5' &&
		s[1] >= '0' && s[1] <= '9' && s[2] >= '0' && s[2] <= '9'
}

// isStatusWord reports whether the core of tok announces a status code.
func isStatusWord(tok string) bool {
	_, core, _ := splitPunct(tok)
	return isStatusKey(core)
}

func isStatusKey(s string) bool {
	return strings.EqualFold(s, "http") || strings.EqualFold(s, "status") || strings.EqualFold(s, "code")
}
