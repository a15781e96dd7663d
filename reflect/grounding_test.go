package reflect

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
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
		// A short value inside a longer word is no quote of it.
		{"INTERNAL_ERROR: queue is full", "region", `"eu"`, false},
		{"no leaderboard for region eu", "region", `"eu"`, true},
	} {
		if got := namesArg(c.text, c.name, json.RawMessage(c.failed)); got != c.want {
			t.Errorf("namesArg(%q, %q) = %v, want %v", c.text, c.name, got, c.want)
		}
	}
}

// TestNamesTool: an error points at a tool by its name or its parts side
// by side, not by its parts scattered as ordinary words.
func TestNamesTool(t *testing.T) {
	for _, c := range []struct {
		text, tool string
		want       bool
	}{
		{"401 Unauthorized: token expired; call auth_refresh", "auth_refresh", true},
		{"head branch does not exist; create-branch first", "create_branch", true},
		{"No canvas generated. Please use 'drawing_generateCanvas' first.", "drawing_generateCanvas", true},
		{"could not create the pull request: branch not found", "create_branch", false},
		{"cannot open the session for this request", "open_session", false},
		{"search failed", "search", true},
	} {
		if got := namesTool(c.text, c.tool); got != c.want {
			t.Errorf("namesTool(%q, %q) = %v, want %v", c.text, c.tool, got, c.want)
		}
	}
}

// TestAccidentalGrounding: a lesson seen in one task stays below the
// injection gate when the only tie between its error and what it advises
// is a shared word: an argument's name used as an ordinary word, a tool's
// name split into ordinary words, a prohibition read as a list of values.
func TestAccidentalGrounding(t *testing.T) {
	llm := []struct {
		name   string
		task   *hindsight.Task
		lesson string
	}{
		{"argument name as a word",
			newTrace("t-index").
				fail("get_row", `{"sheet":"Q3","index":"41"}`, "Error: index out of range for the requested sheet", "").
				ok("get_row", `{"sheet":"Q3","index":"12"}`, `{"row":["a","b"]}`).build(),
			"Pass index to get_row as a row number below the sheet's row count."},
		{"tool name split into words",
			newTrace("t-session").
				fail("list_orders", `{"status":"open"}`, "403: cannot open the session for this request", "403").
				ok("open_session", `{"user":"ann"}`, `{"session":"s-8841"}`).
				ok("list_orders", `{"status":"open"}`, `[{"id": 17}]`).build(),
			"Call open_session before list_orders."},
	}
	for _, c := range llm {
		t.Run(c.name, func(t *testing.T) {
			var cited []int
			for i := range c.task.Steps {
				cited = append(cited, i)
			}
			tool := c.task.Steps[0].Tool
			in := hindsight.Experience{Tool: tool, Situation: tool + " failed", Origin: "llm:m", Confidence: 0.95,
				SourceSteps: cited, Lesson: c.lesson}
			kept, drops := (&Validator{}).Validate(c.task, []hindsight.Experience{in})
			if len(kept) != 1 {
				t.Fatalf("dropped: %+v", drops)
			}
			if kept[0].Confidence != singlePrior {
				t.Errorf("confidence %v, want %v: the error only shares a word with the lesson", kept[0].Confidence, singlePrior)
			}
		})
	}
	// fetch (mcp-server-fetch) refusing a page by robots.txt quotes the
	// URL and says "not allowed": no list of values to choose from.
	robots := newTrace("t-robots").
		fail("fetch", `{"url":"https://www.example.com/search?q=lu+yaojie"}`,
			"The sites robots.txt (https://www.example.com/robots.txt), specifies that autonomous fetching of this page is not allowed, "+
				"<useragent>ModelContextProtocol/1.0</useragent> <url>https://www.example.com/search?q=lu+yaojie</url>", "").
		ok("fetch", `{"url":"https://scholar.example.org/citations?user=lu"}`, "Contents of the page").build()
	exps, _ := Rules{}.Reflect(context.Background(), robots)
	for _, e := range exps {
		if strings.Contains(e.Lesson, "values the error lists") || e.Confidence >= DefaultInjectConfidence {
			t.Errorf("robots.txt refusal: %q at %v", e.Lesson, e.Confidence)
		}
	}
}

// TestGiveUpFlood: repeated failures the error itself calls too fast (a
// rate limit, "too quickly") ground "stop retrying" from one task; other
// repeated failures stay below the gate until other tasks agree.
func TestGiveUpFlood(t *testing.T) {
	for _, c := range []struct {
		text string
		conf float64
	}{
		{"Error: DDG detected an anomaly in the request, you are likely making requests too quickly.", unambiguousPrior},
		{`{"message":"API rate limit exceeded for 203.0.113.7.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`, unambiguousPrior},
		{"INTERNAL_ERROR", singlePrior},
	} {
		task := newTrace("t-flood").
			fail("web_search", `{"query":"cheap gpu deals 2024"}`, c.text, "").
			fail("web_search", `{"query":"affordable graphics cards"}`, c.text, "").
			fail("web_search", `{"query":"gpu under 300"}`, c.text, "").build()
		exps, _ := Rules{}.Reflect(context.Background(), task)
		if len(exps) != 1 || !strings.Contains(exps[0].Lesson, "stop retrying it") || exps[0].Confidence != c.conf {
			t.Errorf("%q: %+v, want one stop-retrying lesson at %v", c.text, exps, c.conf)
		}
	}
}

// FuzzListedValues: the values an error lists are pieces of its text, each
// one token, two or more of them or none.
func FuzzListedValues(f *testing.F) {
	for _, s := range []string{
		"invalid priority: must be one of low, normal, high",
		"address.country must be a two-letter ISO 3166-1 code, one of: US, GB, DE, FR, NL, ES",
		"expected 'asc' or 'desc'", "status must be one of: open|closed. See docs",
		"value is not one of ['x', 'y']", "must be a string or null", "one of", "one of ,,,", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := listedValues(text)
		if len(got) == 1 {
			t.Fatalf("%q lists one value %q", text, got)
		}
		for _, v := range got {
			if v == "" || !strings.Contains(text, v) || strings.ContainsAny(v, " \t") {
				t.Fatalf("%q: listed %q", text, v)
			}
		}
	})
}
