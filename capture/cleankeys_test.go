package capture

import (
	"testing"
)

// TestCleanKeysAgree holds the table of clean common keys to the full
// check: every key it holds passes keyClean, a user key takes a common
// one out, and most common keys are in it.
func TestCleanKeysAgree(t *testing.T) {
	plain, err := NewRedactor(RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	user, err := NewRedactor(RedactorConfig{Keys: []string{"text", "Request-Id"}})
	if err != nil {
		t.Fatal(err)
	}
	others := []string{"", "password", "token", "apiKey", "Authorization", "cookie", "secret", "key", "sk",
		"api", "TEXT", "Text", "text ", "progresstoken", "x", "é"}
	for _, r := range []*Redactor{plain, user, testRedactor(t)} {
		in := 0
		for _, k := range append(others, commonKeys...) {
			if !r.commonKeys.has(k) {
				continue
			}
			in++
			if !r.keyClean(k, false, true) {
				t.Errorf("%q is in the table of clean keys, but its full check fails", k)
			}
		}
		if in < len(commonKeys)*3/4 {
			t.Errorf("only %d of %d common keys are in the table", in, len(commonKeys))
		}
	}
	for _, k := range []string{"text", "requestId"} {
		if user.commonKeys.has(k) {
			t.Errorf("%q is in the table, though a user key makes it sensitive", k)
		}
	}
	for _, k := range commonKeys {
		if plain.keyClean(k, false, true) && !plain.commonKeys.has(k) {
			t.Errorf("%q is clean but not in the table (its slots are taken)", k)
		}
	}
}
