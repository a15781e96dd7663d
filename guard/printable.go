// Package guard keeps what others wrote from acting on Hindsight's users:
// control sequences from reaching a terminal (Printable, Key), and
// instructions aimed at an agent from becoming lessons (Check, Fold,
// Clean). Tool servers, imported packs, model answers and edits are all
// untrusted; everything they say passes here before it is printed,
// stored or told.
package guard

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s with what a terminal would act on removed: escape
// sequences whole (CSI with its parameters, OSC, DCS, APC and PM up to
// their terminator, two-character escapes), the other C0 and C1 control
// characters and DEL except tab and newline, format characters
// (zero-width, bidirectional overrides, tag characters), and invalid
// UTF-8, which becomes U+FFFD. Every identifier and stored text the
// command line prints passes through it, and so does what an import
// stores.
func Printable(s string) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteRune(utf8.RuneError)
		case r == 0x1b:
			n += escapeLen(s[i+n:])
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// escapeLen is how many bytes of s, which follows an ESC, belong to its
// escape sequence.
func escapeLen(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] {
	case '[': // CSI: parameters and intermediates, then a final byte @–~
		for i := 1; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
			if s[i] < 0x20 || s[i] > 0x7e {
				return i
			}
		}
		return len(s)
	case ']', 'P', '_', '^': // OSC, DCS, APC, PM: up to BEL or ST (ESC \)
		for i := 1; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b {
				if i+1 < len(s) && s[i+1] == '\\' {
					return i + 2
				}
				return i
			}
		}
		return len(s)
	}
	_, n := utf8.DecodeRuneInString(s)
	if s[0] < 0x20 {
		return 0
	}
	return n
}

// Key is Printable for a text that becomes a key (a task id, a server or
// tool name): tabs and newlines become spaces, and the ends are trimmed.
func Key(s string) string {
	if plain(s) && strings.TrimSpace(s) == s {
		return s
	}
	return strings.TrimSpace(strings.NewReplacer("\t", " ", "\n", " ").Replace(Printable(s)))
}

// plain reports whether s is printable ASCII (tab and newline allowed).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t' && c != '\n') || c >= 0x7f {
			return false
		}
	}
	return true
}
