package guard

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":                         "plain text",
		"tab\tand\nnewline":                  "tab\tand\nnewline",
		"title\x1b]0;pwned\x07 set":          "title set",
		"title\x1b]0;pwned\x1b\\ st":         "title st",
		"clear\x1b[2J\x1b[H":                 "clear",
		"red\x1b[31mtext\x1b[0m":             "redtext",
		"esc\x1bc reset":                     "esc reset",
		"cut\x1b[12":                         "cut",
		"c1 \u009b2J \u009d0;x\u009c":        "c1 2J 0;x",
		"del\x7f cr\r nul\x00":               "del cr nul",
		"zero\u200bwidth \u202eevil\u202c":   "zerowidth evil",
		"tags \U000E0069\U000E0067 end":      "tags  end",
		"bad \xff\xfe utf8":                  "bad \ufffd\ufffd utf8",
		"кириллица и 中文 stay":                "кириллица и 中文 stay",
		"\ufffd encoded replacement is kept": "\ufffd encoded replacement is kept",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"task-1":             "task-1",
		" task\x1b[2J\n1\t ": "task 1",
		"\x07":               "",
	} {
		if got := Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzPrintable: whatever comes in, what comes out is valid UTF-8 with no
// control character but tab and newline and no format character, and
// Printable is idempotent.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "a\x1b[31mred", "\u009b\u200b\U000E0041", "\xff", "ok"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Printable(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Printable(%q) = %q: invalid UTF-8", s, out)
		}
		for _, r := range out {
			if (unicode.IsControl(r) && r != '\t' && r != '\n') || unicode.Is(unicode.Cf, r) {
				t.Fatalf("Printable(%q) = %q keeps %U", s, out, r)
			}
		}
		if Printable(out) != out {
			t.Fatalf("Printable is not idempotent on %q", s)
		}
		if k := Key(s); strings.ContainsAny(k, "\t\n") || strings.TrimSpace(k) != k {
			t.Fatalf("Key(%q) = %q", s, k)
		}
	})
}
