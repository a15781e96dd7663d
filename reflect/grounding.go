package reflect

import (
	"encoding/json"
	"regexp"
	"strings"
)

// namesArg reports whether an error text points at argument name by
// structure, not by a word that happens to be the argument's name: it
// quotes the name ('file_path'), states the value the call passed for it
// (failed, a scalar of two or more characters, as a whole token), or names it as an
// argument ("missing required argument: currency", "field amount",
// "pass pause_ms", "limit=", "count must be…").
func namesArg(errText, name string, failed json.RawMessage) bool {
	if len(name) < 2 {
		return false
	}
	if v := scalarOf(failed); len(v) >= 2 && containsToken(errText, v) {
		return true
	}
	if !mentions(errText, name) {
		return false
	}
	if quotesName(errText, name) {
		return true
	}
	q := regexp.QuoteMeta(strings.ToLower(name))
	return regexp.MustCompile(`\b(argument|parameter|param|field|property|key|option|column|attribute|pass|set|provide|add|include|specify|supply)s?\W{1,3}` + q + `\b|\b` + q + `\s*(=|:\s|is (required|missing|invalid|not)|must|should|cannot|expected)`).MatchString(strings.ToLower(errText))
}
