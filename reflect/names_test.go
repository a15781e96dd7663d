package reflect

import (
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// TestKeepNames holds templating to keeping the quoted names of real
// validators' errors apart, and to masking the quoted words the task
// itself sent.
func TestKeepNames(t *testing.T) {
	task := &hindsight.Task{Steps: []hindsight.Step{{Method: "tools/call", Tool: "get_text_file_contents",
		Arguments: []byte(`{"files":[{"path":"/root/a.md","mode":"strict"}]}`)}}}
	vals := newTaskValues(task)
	for _, c := range []struct{ tpl, text, want string }{
		// jsonschema (Python MCP servers)
		{"Input validation error: <*> is a required property", "Input validation error: 'file_path' is a required property",
			"Input validation error: 'file_path' is a required property"},
		// PostgreSQL
		{"column <*> of relation <*> does not exist", `column "totl" of relation "orders" does not exist`,
			`column "totl" of relation "orders" does not exist`},
		// a quoted word the task sent is its value
		{"unknown mode <*>", "unknown mode 'strict'", "unknown mode <*>"},
		// paths, ids and numbers stay masked
		{"ENOENT: no such file or directory, open <*>", "ENOENT: no such file or directory, open '/root/a.md'",
			"ENOENT: no such file or directory, open <*>"},
		{"no order <*> for customer <*>", "no order 'ORD-2891' for customer 'cus_8842'", "no order <*> for customer <*>"},
		// Google Sheets: the range is the call's value
		{"Unable to parse range: <*>", "Unable to parse range: 'Sheet1!A1:B2'", "Unable to parse range: <*>"},
	} {
		if got := keepNames(c.tpl, c.text, vals); got != c.want {
			t.Errorf("keepNames(%q, %q) = %q, want %q", c.tpl, c.text, got, c.want)
		}
	}
}
