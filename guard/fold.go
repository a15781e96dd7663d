package guard

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
)

// Fold returns the form of s that rules match, never stored or shown:
//
//   - invisible Unicode tag characters (U+E0020–U+E007E), which spell
//     ASCII no one sees, are read as the ASCII they spell;
//   - other format characters (zero-width, joiners, bidirectional
//     controls, soft hyphens) and variation selectors are removed, so a
//     word cannot be split invisibly; controls become spaces;
//   - NFKC folds compatibility forms (fullwidth, mathematical letters,
//     ligatures);
//   - letters are lower-cased, and each non-ASCII letter that Unicode's
//     confusables table (TR39) draws like ASCII letters becomes them:
//     Cyrillic "о" is "o", Greek "ι" is "i";
//   - accents are removed (NFD without combining marks);
//   - runs of white space become one space.
//
// ASCII letters are never mapped (TR39's skeleton would turn "m" into
// "rn"), so rules are written in plain words and go through Fold too.
func Fold(s string) string {
	if f, ok := foldASCII(s); ok {
		return f
	}
	return foldUnicode(s)
}

// foldASCII is Fold of an ASCII s (ok false otherwise), which needs no
// table: controls and spaces collapse to one space, letters are
// lower-cased, nothing else changes.
func foldASCII(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return "", false
		}
	}
	b := make([]byte, 0, len(s))
	space := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= ' ' || c == 0x7f:
			if !space {
				b = append(b, ' ')
			}
			space = true
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b = append(b, c)
		space = false
	}
	if n := len(b); n > 0 && b[n-1] == ' ' {
		b = b[:n-1]
	}
	return string(b), true
}

// foldUnicode is Fold of any s.
func foldUnicode(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 0xE0020 && r <= 0xE007E:
			b.WriteRune(r - 0xE0000)
		case unicode.IsControl(r):
			b.WriteByte(' ')
		case unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r):
		default:
			b.WriteRune(r)
		}
	}
	s = strings.ToLower(norm.NFKC.String(b.String()))
	b.Reset()
	space := true
	for _, r := range norm.NFD.String(s) {
		switch {
		case unicode.Is(unicode.Mn, r):
			continue
		case unicode.IsSpace(r):
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		case r >= 0x80:
			if a, ok := asciiLike(r); ok {
				b.WriteString(a)
				space = false
				continue
			}
		}
		b.WriteRune(r)
		space = false
	}
	return strings.TrimRight(b.String(), " ")
}

var (
	lookalikeOnce sync.Once
	lookalike     map[rune]string
)

// asciiLike returns the lower-case ASCII letters or digits that r (lower
// case, or its capital) is confusable with, if any.
func asciiLike(r rune) (string, bool) {
	lookalikeOnce.Do(buildLookalike)
	a, ok := lookalike[r]
	return a, ok
}

// lookalikeRanges are the blocks whose letters are drawn like Latin ones:
// Latin extensions, IPA, Greek, Cyrillic, Armenian, Cherokee, letterlike
// symbols, Cyrillic extensions. NFKC has already folded fullwidth and
// mathematical forms.
var lookalikeRanges = [][2]rune{{0x80, 0x58f}, {0x13a0, 0x13ff}, {0x1d00, 0x1dbf}, {0x1e00, 0x1fff},
	{0x2100, 0x218f}, {0x2c60, 0x2c7f}, {0xa640, 0xa69f}, {0xa720, 0xa7ff}, {0xab50, 0xabbf}}

func buildLookalike() {
	lookalike = map[rune]string{}
	for _, rg := range lookalikeRanges {
		for r := rg[0]; r <= rg[1]; r++ {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				continue
			}
			for _, c := range []rune{r, unicode.ToUpper(r)} {
				if a := skeletonASCII(c); a != "" {
					lookalike[r] = a
					break
				}
			}
		}
	}
}

// skeletonASCII is the TR39 skeleton of r, accents dropped and lower-cased,
// when it is made of ASCII letters and digits only and differs from r.
func skeletonASCII(r rune) string {
	sk := confusables.Skeleton(string(r))
	if sk == string(r) {
		return ""
	}
	var b strings.Builder
	for _, c := range sk {
		switch {
		case unicode.Is(unicode.Mn, c):
		case c < 0x80 && (unicode.IsLetter(c) || unicode.IsDigit(c)):
			b.WriteRune(unicode.ToLower(c))
		default:
			return ""
		}
	}
	return b.String()
}

// Clean returns s as it may be stored: its own letters, without the
// characters no reader sees (format characters, tag characters, variation
// selectors) and without control characters but tab and newline.
func Clean(s string) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range Printable(s) {
		if !unicode.Is(unicode.Variation_Selector, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}
