package reflect

import "testing"

// TestVacuous holds the vacuity check to realistic lessons: advice that
// only restates its error template is refused, advice that names a tool,
// a source, a shape, an argument the template masks, or a behaviour is
// kept.
func TestVacuous(t *testing.T) {
	for _, c := range []struct {
		lesson, tool, template string
		implied                []string
		vacuous                bool
	}{
		{"When fetch fails with `Failed to fetch <*> - status code 403`: the url value was rejected; pass a different, valid url.",
			"fetch", "Failed to fetch <*> - status code 403", []string{"url"}, true},
		{"When read_file fails with `ENOENT: no such file or directory, open <*>`: the path value was rejected; pass a different, valid path.",
			"read_file", "ENOENT: no such file or directory, open <*>", []string{"path"}, true},
		{"When run_query fails with `column <*> does not exist`: pass a valid column.",
			"run_query", "column <*> does not exist", nil, true},
		// The argument the template masks is named, and nothing else: the
		// error quoted its value, so it said which argument.
		{"When get_sheet fails with `Unable to parse range: <*>`: the range value was rejected; pass a different, valid range.",
			"get_sheet", "Unable to parse range: <*>", []string{"range"}, true},
		// A shape the template does not carry.
		{"When create_event fails with `invalid start <*>: expected YYYY-MM-DD`: pass start as YYYY-MM-DD, not MM/DD/YYYY.",
			"create_event", "invalid start <*>: expected YYYY-MM-DD", []string{"start"}, false},
		// Where to take the value from.
		{"When get_order fails with `<*> Not Found: no order <*>`: take order_id from the result of find_orders instead of guessing or reusing it.",
			"get_order", "<*> Not Found: no order <*>", []string{"order_id"}, false},
		// A field the JSON error names only inside a masked value.
		{"When start_process fails with `Error: [ { <*>: <*> } ]`: pass timeout_ms (a number).",
			"start_process", "Error: [ { <*>: <*> } ]", nil, false},
		// A tool to call first.
		{"Call auth_refresh before search_code (otherwise search_code fails with `401 Unauthorized: token expired`).",
			"search_code", "401 Unauthorized: token expired", nil, false},
		// A behaviour the error does not state.
		{"When invite fails with `503 Service Unavailable`, retry the identical call once before changing anything: it can fail transiently.",
			"invite", "503 Service Unavailable", nil, false},
	} {
		got := vacuous(c.lesson, c.tool, c.template, c.implied) != ""
		if got != c.vacuous {
			t.Errorf("vacuous(%q) = %v, want %v", c.lesson, got, c.vacuous)
		}
	}
}
