package errtemplate

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"",
	"payment amount does not add up, total price is 1203, but paid 833",
	"invalid date format '03/15/2025', expected YYYY-MM-DD",
	`open "/home/bob/My Documents/plan.md": no such file`,
	`'a "x y" b' "c`,
	`name="John Smith", (status=404) HTTP 401 [::1]:80`,
	"“quoted” ‘single’ «guillemets» `tick`",
	"don't 'it's' user's '' '",
	"bad \xff\xfe utf-8 ٤٢ <*> <*>, x<*>y",
	`{"error": {"code": 404, "message": "Not found: [a] {b}", "details": [{"field": "x"}]}}`,
	`Error: [ { "code": "invalid_type", "path": [ "timeout_ms" ] } ]`,
	`{"a": "b [2]", "[": null}`,
}

// FuzzMask: no panic, valid UTF-8, Mask idempotent, Tokens stable when its
// tokens are joined again.
func FuzzMask(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := Mask(s)
		if !utf8.ValidString(m) {
			t.Fatalf("Mask(%q) = %q, invalid UTF-8", s, m)
		}
		if mm := Mask(m); mm != m {
			t.Fatalf("Mask(%q) = %q, Mask of that = %q", s, m, mm)
		}
		toks := Tokens(s)
		for _, tok := range toks {
			if tok == "" || !utf8.ValidString(tok) {
				t.Fatalf("Tokens(%q) has %q", s, tok)
			}
		}
		if again := Tokens(strings.Join(toks, " ")); !slices.Equal(again, toks) {
			t.Fatalf("Tokens(%q) = %q, tokens of them joined = %q", s, toks, again)
		}
		if mt := Tokens(m); !slices.Equal(mt, maskTokens(s, -1)) {
			t.Fatalf("Tokens(Mask(%q)) = %q, masked tokens %q", s, mt, maskTokens(s, -1))
		}
	})
}

// FuzzMiner: Add and Match never panic, a text just added matches its own
// cluster and is an instance of its template, and Add after Match agrees.
func FuzzMiner(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, fuzzSeeds[(i+1)%len(fuzzSeeds)], s+" 7")
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		m := NewMiner(Options{MaxChildren: 3, MaxClusters: 2, MaxTokens: 8})
		for _, s := range []string{a, b, c, a} {
			want, wantOK := m.Match(key, s)
			got, _ := m.Add(key, s)
			if wantOK && got.ID != want.ID {
				t.Fatalf("Match(%q) said %s, Add joined %s", s, want.ID, got.ID)
			}
			again, ok := m.Match(key, s)
			if !ok || again != got {
				t.Fatalf("Match(%q) after Add = %+v, %v; want %+v", s, again, ok, got)
			}
			tpl, txt := Tokens(got.Template), maskTokens(s, 8)
			if len(tpl) != len(txt) {
				t.Fatalf("template %q has %d tokens, text %q %d", got.Template, len(tpl), s, len(txt))
			}
			for i := range tpl {
				if tpl[i] != Wildcard && tpl[i] != txt[i] {
					t.Fatalf("text %q is no instance of %q", s, got.Template)
				}
			}
		}
	})
}
