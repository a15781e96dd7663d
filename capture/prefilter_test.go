package capture

import (
	"strings"
	"testing"
)

// naiveKeywords is what keywordIndex.find must agree with: every keyword
// looked for in strings.ToLower(s), as gitleaks does.
func naiveKeywords(x *keywordIndex, s string) uint64 {
	lower := strings.ToLower(s)
	var found uint64
	for _, g := range x.groups {
		for _, k := range g {
			if strings.Contains(lower, k.text) {
				found |= k.bits
			}
		}
	}
	return found
}

func testIndex() *keywordIndex {
	x := &keywordIndex{}
	for i, k := range []string{"ey", "eyj", "token", "Private Key", "://", "sk", "ghp_", "key", "kelvin"} {
		x.add(k, 1<<i)
	}
	return x
}

func TestKeywordIndex(t *testing.T) {
	x := testIndex()
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"", 0},
		{"e", 0},
		{"ey", 1},
		{"EYJhbGciOi", 1 | 2},
		{"progressTOKEN", 1 << 2},
		{"-----BEGIN RSA PRIVATE KEY-----", 1<<3 | 1<<7 | 1<<0},
		{"https://x", 1 << 4},
		{"risky", 1 << 5},
		{"\u212Aelvin", 1 << 8}, // the Kelvin sign lower-cases to 'k'
		{"naïve token", 1 << 2},
		{"nothing here at all", 0},
	} {
		got := x.find(tc.in, 0)
		if got != tc.want {
			t.Errorf("find(%q) = %b, want %b", tc.in, got, tc.want)
		}
		if naive := naiveKeywords(x, tc.in); got != naive {
			t.Errorf("find(%q) = %b, strings.Contains says %b", tc.in, got, naive)
		}
	}
}

// TestGitleaksKeywords checks the keywords read from the gitleaks rule file
// against the compiled rules, and that the index finds each of them, so the
// prefilter skips only text gitleaks itself would skip.
func TestGitleaksKeywords(t *testing.T) {
	det, err := gitleaksDetector() // fails on any keyword the file reading missed
	if err != nil {
		t.Fatal(err)
	}
	x, err := keywordsIndex()
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, k := range gitleaksKeywords {
		read[strings.ToLower(k)] = true
	}
	if len(read) != len(det.Config.Keywords) {
		t.Errorf("read %d keywords from the rule file, the compiled rules have %d", len(read), len(det.Config.Keywords))
	}
	for id, rule := range det.Config.Rules {
		for _, k := range rule.Keywords {
			for _, s := range []string{k, strings.ToUpper(k), "xx " + k + " yy"} {
				if x.find(s, 0)&gitleaksBit == 0 {
					t.Errorf("rule %s: keyword %q not found in %q", id, k, s)
				}
			}
		}
	}
	if err := checkKeywords(det, gitleaksKeywords[1:]); err == nil {
		t.Error("checkKeywords accepted a list missing a keyword")
	}
}

// TestSensitiveEnds checks the filter in front of builtinSensitive: every
// sensitive name, alone or as the end of a longer one, gets through it.
func TestSensitiveEnds(t *testing.T) {
	var names []string
	for n := range sensitiveExact {
		names = append(names, n)
	}
	for _, s := range sensitiveSuffixes {
		names = append(names, s, "db"+s)
	}
	for _, n := range names {
		if !builtinSensitive(n) {
			t.Errorf("builtinSensitive(%q) = false", n)
		}
	}
	for _, n := range []string{"jsonrpc", "method", "params", "name", "text", "progresstoken", "id", "ab"} {
		if builtinSensitive(n) {
			t.Errorf("builtinSensitive(%q) = true", n)
		}
	}
}

func FuzzKeywordIndex(f *testing.F) {
	for _, s := range []string{"", "ey", "EYJ", "a\u212Aelvin", "x://y", "İstanbul token", "\xff\xfekey"} {
		f.Add(s)
	}
	x := testIndex()
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := x.find(s, 0), naiveKeywords(x, s); got != want {
			t.Fatalf("find(%q) = %b, strings.Contains says %b", s, got, want)
		}
	})
}

// findEveryPosition is findASCII without its filter: at every position,
// in order, stopping as findASCII does. The filter only skips places
// where no keyword begins, so the two agree exactly.
func findEveryPosition(x *keywordIndex, s string, stop uint64) uint64 {
	if stop == 0 {
		stop = x.all
	}
	var found uint64
	for i := 0; i+minKeyword <= len(s); i++ {
		if found |= x.at(s[i:], found); found&stop == stop {
			return found
		}
	}
	return found
}

// checkFindASCII fails t when the gitleaks index's findASCII disagrees
// with strings.Contains, or, given a stop, with findEveryPosition.
func checkFindASCII(t *testing.T, x *keywordIndex, s string) {
	t.Helper()
	if got, want := x.findASCII(s, 0), naiveKeywords(x, s); got != want {
		t.Fatalf("findASCII(%q) = %b, strings.Contains says %b", s, got, want)
	}
	for _, stop := range []uint64{gitleaksBit, 1, gitleaksBit | 1<<3} {
		if got, want := x.findASCII(s, stop), findEveryPosition(x, s, stop); got != want {
			t.Fatalf("findASCII(%q, %b) = %b, at every position %b", s, stop, got, want)
		}
	}
}

// TestFindASCIIEveryLane puts each keyword of the gitleaks index, in both
// cases, at every place of plain text long enough for the loop that reads
// eight bytes at a time, so that each of its positions sees each keyword.
func TestFindASCIIEveryLane(t *testing.T) {
	x, err := keywordsIndex()
	if err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("hindsight relay ", 3)
	for _, g := range x.groups {
		for _, k := range g {
			for _, kw := range []string{k.text, strings.ToUpper(k.text)} {
				for p := range 20 {
					checkFindASCII(t, x, filler[:p]+kw+filler[p:])
				}
			}
		}
	}
}

// FuzzFindASCII holds the gitleaks index's findASCII to strings.Contains
// and to a search at every position, on ASCII text.
func FuzzFindASCII(f *testing.F) {
	for _, s := range []string{"", "hindsight hindsight hindsight", "Authorization: Bearer abcdefgh", "x://y and sk-live key ghp_",
		"aaaaaaaaaaaaaaaaaaaaaeyJ", "0123456789ABCDEFGHIJ api_key=1234"} {
		f.Add(s)
	}
	x, err := keywordsIndex()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !isASCII(s) {
			return
		}
		checkFindASCII(t, x, s)
	})
}
