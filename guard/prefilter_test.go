package guard

import (
	"reflect"
	"strings"
	"testing"
)

// checkUnfiltered is Check without the prefilters: every term looked
// for, the command pattern always run, the text always folded by
// foldUnicode.
func checkUnfiltered(t string) *Finding {
	if t == "" {
		return nil
	}
	f := foldUnicode(t)
	rs := rules()
	for i := range rs {
		if m := rs[i].match(f, nil); m != "" {
			return &Finding{Reason: rs[i].reason, Match: cut(m, 60)}
		}
	}
	if m := commandPattern().FindString(f); m != "" {
		return &Finding{Reason: ReasonCommand, Match: cut(strings.TrimSpace(m), 60)}
	}
	return nil
}

// TestPrefiltersChangeNothing: Check with its prefilters finds what it
// finds without them, hostile and ordinary texts alike.
func TestPrefiltersChangeNothing(t *testing.T) {
	texts := append([]string{"a; rm -rf /", "x $(id)", "pipe | bash", "PYTHON3 -c 'x'", "BASE64\t-d blob"}, ordinary...)
	for k := range hostile {
		texts = append(texts, k, strings.ToUpper(k), "\t"+k+"\n")
	}
	for _, s := range texts {
		if got, want := Check(s), checkUnfiltered(s); !reflect.DeepEqual(got, want) {
			t.Errorf("Check(%q) = %+v, unfiltered %+v", s, got, want)
		}
	}
}

// FuzzPrefilters: the ASCII fold is the Unicode fold, and Check's
// prefilters never hide a finding.
func FuzzPrefilters(f *testing.F) {
	addSeeds(f)
	f.Add("  Run\tCURL  x |SH\x7f")
	f.Fuzz(func(t *testing.T, s string) {
		if a, ok := foldASCII(s); ok {
			if u := foldUnicode(s); a != u {
				t.Fatalf("foldASCII(%q) = %q, foldUnicode %q", s, a, u)
			}
		}
		if got, want := Check(s), checkUnfiltered(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("Check(%q) = %+v, unfiltered %+v", s, got, want)
		}
	})
}
