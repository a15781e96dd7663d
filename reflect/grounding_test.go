package reflect

import (
	"encoding/json"
	"testing"
)

// TestNamesArg: grounding rests on structure or the value, never on a
// word of the error that happens to be an argument's name.
func TestNamesArg(t *testing.T) {
	for _, c := range []struct {
		text, name, failed string
		want               bool
	}{
		{"missing required argument: currency", "currency", ``, true},
		{"Input validation error: 'file_path' is a required property", "file_path", ``, true},
		{`Invalid params: time_min "2026-03-02 10:00" is not an RFC 3339 timestamp`, "time_min", `"2026-03-02 10:00"`, true},
		{"secondary rate limit exceeded; retry after 2100 ms or pass pause_ms", "pause_ms", ``, true},
		{"ValueError: limit must be at most 100", "limit", `500`, true},
		// PostgreSQL: the word "table" is no argument named table.
		{`relation "orders" does not exist; check the table name`, "table", `"invoices"`, false},
		// An HTTP 404 page mentions a path; the argument path was not it.
		{"Not Found: the requested path was not found on this server", "path", `"/api/v2/items"`, false},
		{"Failed to fetch https://example.com/a - status code 404", "url", `"https://example.com/a"`, true},
	} {
		if got := namesArg(c.text, c.name, json.RawMessage(c.failed)); got != c.want {
			t.Errorf("namesArg(%q, %q) = %v, want %v", c.text, c.name, got, c.want)
		}
	}
}
