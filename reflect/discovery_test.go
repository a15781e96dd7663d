package reflect

import (
	"context"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// discoveryCases are recoveries through a discovery tool, with the error
// texts real servers give: after the error the agent lists what exists,
// looks an id up or reads a schema, then retries with what it found. The
// lesson names the discovery call, not "pass a different, valid value".
var discoveryCases = []struct {
	name    string
	task    *hindsight.Task
	contain []string
	absent  []string
	steps   []int
	conf    float64
}{
	{
		// BigQuery: an HTTP API error as a JSON body; the table id comes
		// from list_tables.
		name: "table id from list_tables (BigQuery JSON error)",
		task: newTrace("t-bq").
			fail("get_table", `{"dataset_id":"sales_2024","table_id":"orders_q3"}`,
				`{"error":{"code":404,"message":"Not found: Table acme-prod-4412:sales_2024.orders_q3 was not found in location US","status":"NOT_FOUND"}}`, "http-404").
			ok("list_tables", `{"dataset_id":"sales_2024"}`, `{"tables":[{"table_id":"orders_2024_q3"},{"table_id":"customers"}]}`).
			ok("get_table", `{"dataset_id":"sales_2024","table_id":"orders_2024_q3"}`, `{"schema":{"fields":[{"name":"order_id","type":"STRING"}]}}`).build(),
		contain: []string{"call list_tables first to get a valid table_id, and take table_id from its result"},
		absent:  []string{"orders_q3", "orders_2024_q3", "sales_2024", "acme-prod-4412"},
		steps:   []int{0, 1, 2},
		conf:    singlePrior,
	},
	{
		// Google Sheets: a missing sheet; the sheet's name comes from the
		// spreadsheet's metadata.
		name: "sheet name from list_sheets (Sheets API)",
		task: newTrace("t-sheets").
			fail("read_range", `{"spreadsheet_id":"1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms","sheet":"Revenue","range":"A1:D20"}`,
				`{"error":{"code":400,"message":"Unable to parse range: Revenue!A1:D20","status":"INVALID_ARGUMENT"}}`, "http-400").
			ok("list_sheets", `{"spreadsheet_id":"1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms"}`, `{"sheets":[{"title":"Summary"},{"title":"Rev_FY24"},{"title":"Costs"}]}`).
			ok("read_range", `{"spreadsheet_id":"1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms","sheet":"Rev_FY24","range":"A1:D20"}`, `{"values":[["Q1","120"]]}`).build(),
		contain: []string{"call list_sheets first to get a valid sheet"},
		absent:  []string{"Revenue", "Rev_FY24", "1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms"},
		steps:   []int{0, 1, 2},
		conf:    singlePrior,
	},
	{
		// kubectl through a Kubernetes server: the namespace comes from
		// the list of namespaces.
		name: "namespace from list_namespaces (kubectl)",
		task: newTrace("t-k8s").
			fail("get_pods", `{"namespace":"payment"}`, `Error from server (NotFound): namespaces "payment" not found`, "").
			ok("list_namespaces", `{}`, "NAME            STATUS   AGE\ndefault         Active   41d\npayments-prod   Active   12d\nkube-system     Active   41d").
			ok("get_pods", `{"namespace":"payments-prod"}`, "NAME                      READY   STATUS\napi-7d9f8b6c5-x2k4q      1/1     Running").build(),
		contain: []string{"call list_namespaces first to get a valid namespace"},
		absent:  []string{"payment", "payments-prod"},
		steps:   []int{0, 1, 2},
		conf:    singlePrior,
	},
	{
		// Notion: a required parent missing from a JSON validation error;
		// the database id comes from search. The error names the argument
		// (body.parent), not the tool.
		name: "added id from search (Notion JSON error)",
		task: newTrace("t-notion").
			fail("create_page", `{"title":"Weekly sync notes"}`,
				`{"object":"error","status":400,"code":"validation_error","message":"body failed validation: body.parent should be defined, instead was `+"`undefined`"+`."}`, "http-400").
			ok("search", `{"query":"Meeting notes","filter":"database"}`, `{"results":[{"object":"database","id":"8e2c4f1a-93b7-4c1e-b2a0-5d6f7e8a9b0c","title":"Meeting notes"}]}`).
			ok("create_page", `{"title":"Weekly sync notes","parent":"8e2c4f1a-93b7-4c1e-b2a0-5d6f7e8a9b0c"}`, `{"object":"page","id":"0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"}`).build(),
		contain: []string{"call search first to get parent, and pass the parent its result gives"},
		absent:  []string{"8e2c4f1a", "Weekly sync", "Meeting notes"},
		steps:   []int{0, 1, 2},
		conf:    singlePrior,
	},
	{
		// PostgreSQL: an unknown relation; the table's name in the query
		// comes from list_tables.
		name: "table name in a query from list_tables (PostgreSQL)",
		task: newTrace("t-sql").
			fail("query", `{"sql":"SELECT email FROM user_accounts WHERE created_at > now() - interval '7 days'"}`,
				"ERROR: relation \"user_accounts\" does not exist\nLINE 1: SELECT email FROM user_accounts WHERE created_at > now() - i...\n                          ^", "").
			ok("list_tables", `{"schema":"public"}`, `[{"table_name":"accounts"},{"table_name":"sessions"}]`).
			ok("query", `{"sql":"SELECT email FROM accounts WHERE created_at > now() - interval '7 days'"}`, `[{"email":"ann@example.com"}]`).build(),
		contain: []string{"call list_tables first and take the names in sql from its result"},
		absent:  []string{"user_accounts", "created_at", "7 days"},
		steps:   []int{0, 1, 2},
		conf:    singlePrior,
	},
	{
		// A file system server: ENOENT, then a listing of the directory;
		// the file's name comes from it.
		name: "file name in a path from list_directory (filesystem)",
		task: newTrace("t-fs").
			fail("read_file", `{"path":"/srv/exports/report_q3.csv"}`, "Error: ENOENT: no such file or directory, open '/srv/exports/report_q3.csv'", "errno-ENOENT").
			ok("list_directory", `{"path":"/srv/exports"}`, "[FILE] report_2024_q3.csv\n[FILE] report_2024_q2.csv\n[DIR] archive").
			ok("read_file", `{"path":"/srv/exports/report_2024_q3.csv"}`, "region,revenue\neu,120").build(),
		contain: []string{"call list_directory first and take the names in path from its result"},
		absent:  []string{"report_q3", "report_2024_q3", "/srv/exports"},
		steps:   []int{0, 1, 2},
		conf:    singlePrior,
	},
	{
		// The error names the discovery tool: the lesson is grounded.
		name: "lookup named by the error (GitHub-style 422)",
		task: newTrace("t-named-lookup").
			fail("assign_issue", `{"issue":4411,"assignee":"jdoe"}`, "422 Unprocessable Entity: assignee 'jdoe' is not a collaborator; call list_collaborators for valid logins", "http-422").
			ok("list_collaborators", `{}`, `[{"login":"jane-doe-dev"},{"login":"ops-bot"}]`).
			ok("assign_issue", `{"issue":4411,"assignee":"jane-doe-dev"}`, `{"assigned":true}`).build(),
		contain: []string{"call list_collaborators first to get a valid assignee"},
		absent:  []string{"jdoe", "jane-doe-dev", "4411", "before assign_issue"},
		steps:   []int{0, 1, 2},
		conf:    unambiguousPrior,
	},
}

// TestRulesDiscovery: a recovery through a discovery tool teaches the
// discovery call, quotes no value of its task, and passes validation (it
// says something the error does not).
func TestRulesDiscovery(t *testing.T) {
	for _, c := range discoveryCases {
		t.Run(c.name, func(t *testing.T) {
			exps, err := Rules{}.Reflect(context.Background(), c.task)
			if err != nil {
				t.Fatal(err)
			}
			if len(exps) != 1 {
				t.Fatalf("got %d experiences, want 1: %+v", len(exps), exps)
			}
			e := exps[0]
			t.Logf("lesson: %s", e.Lesson)
			for _, s := range c.contain {
				if !strings.Contains(e.Lesson, s) {
					t.Errorf("lesson %q lacks %q", e.Lesson, s)
				}
			}
			all := strings.Join([]string{e.Situation, e.Lesson, e.Action, e.Result}, " | ")
			for _, s := range c.absent {
				if strings.Contains(all, s) {
					t.Errorf("experience quotes %q: %q", s, all)
				}
			}
			if !slicesEqual(e.SourceSteps, c.steps) {
				t.Errorf("source steps %v, want %v", e.SourceSteps, c.steps)
			}
			kept, drops := (&Validator{}).Validate(c.task, exps)
			if len(kept) != 1 {
				t.Fatalf("refused: %+v", drops)
			}
			if kept[0].Confidence != c.conf {
				t.Errorf("confidence %v, want %v", kept[0].Confidence, c.conf)
			}
		})
	}
}

// TestRulesDiscoveryBefore: a lookup made before the failure is where the
// value was to be taken from, not a call to make first.
func TestRulesDiscoveryBefore(t *testing.T) {
	task := newTrace("t-before-lookup").
		ok("list_tables", `{"dataset_id":"sales_2024"}`, `{"tables":[{"table_id":"orders_2024_q3"}]}`).
		fail("get_table", `{"dataset_id":"sales_2024","table_id":"orders_q3"}`, `{"error":{"code":404,"message":"Not found: Table sales_2024.orders_q3","status":"NOT_FOUND"}}`, "http-404").
		ok("get_table", `{"dataset_id":"sales_2024","table_id":"orders_2024_q3"}`, `{"schema":{}}`).build()
	exps, _ := Rules{}.Reflect(context.Background(), task)
	if len(exps) != 1 || !strings.Contains(exps[0].Lesson, "take table_id from the result of list_tables") || strings.Contains(exps[0].Lesson, "first") {
		t.Fatalf("lessons %+v", exps)
	}
}

// TestRulesListedConstraint: when the error states the values it takes
// and the retry used one of them, the lesson is the constraint with the
// value that worked (the error's own words, no value of the task).
func TestRulesListedConstraint(t *testing.T) {
	task := newTrace("t-country").
		fail("update_address", `{"customer_id":"C-48213","address":{"line1":"12 Elm Street","country":"Germany"}}`,
			`{"error":{"type":"invalid_request_error","param":"address.country","message":"address.country must be a two-letter ISO 3166-1 code, one of: US, GB, DE, FR, NL, ES"}}`, "http-400").
		ok("update_address", `{"customer_id":"C-48213","address":{"line1":"12 Elm Street","country":"DE"}}`, `{"updated":true}`).build()
	exps, _ := Rules{}.Reflect(context.Background(), task)
	if len(exps) != 1 {
		t.Fatalf("lessons %+v", exps)
	}
	l := exps[0].Lesson
	t.Log(l)
	if !strings.Contains(l, `set address.country to one of the values the error lists ("US", "GB", "DE", "FR", "NL", "ES"); "DE" worked`) || strings.Contains(l, "Germany") {
		t.Errorf("lesson %q", l)
	}
	kept, drops := (&Validator{}).Validate(task, exps)
	if len(kept) != 1 || kept[0].Confidence != unambiguousPrior {
		t.Fatalf("kept %+v, dropped %+v", kept, drops)
	}
}
