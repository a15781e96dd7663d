//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// The lessons a team's daemons would have learnt after a few months:
// spread over namespaces (teams), servers and their tools, each about one
// of a tool's error templates, with text varied by argument names, values'
// shapes and the fix the server's error prescribed.

type server struct {
	name  string
	tools []string
}

var servers = []server{
	{"github", []string{"create_issue", "get_file_contents", "create_pull_request", "search_code", "merge_pull_request"}},
	{"postgres", []string{"query", "list_tables", "describe_table", "explain"}},
	{"files", []string{"read_file", "write_file", "list_directory", "move_file", "edit_file"}},
	{"s3", []string{"put_object", "get_object", "list_objects", "copy_object"}},
	{"jira", []string{"create_ticket", "transition_issue", "search_issues", "add_comment"}},
	{"slack", []string{"post_message", "list_channels", "upload_file"}},
	{"k8s", []string{"apply_manifest", "get_pods", "scale_deployment", "rollout_status"}},
	{"stripe", []string{"create_charge", "refund_payment", "list_invoices", "update_customer"}},
	{"browser", []string{"navigate", "click", "fill_form", "screenshot"}},
	{"search", []string{"web_search", "fetch_page"}},
}

type template struct {
	code, tmpl, situation, lesson string
}

var templates = []template{
	{"413", "HTTP 413 Payload Too Large: body exceeds <*> bytes",
		"%s answered 413 because %s was larger than the server accepts",
		"Call %s with %s split into parts below the size the 413 error names, then send the parts in order."},
	{"404", "not found: <*>",
		"%s failed with not found: %s named something that does not exist",
		"Before calling %s, list what exists and pass %s exactly as the listing spells it."},
	{"ENOENT", "ENOENT: no such file or directory, open '<*>'",
		"%s could not open the file: %s was a relative path",
		"Pass %s to %s as an absolute path under the allowed root; relative paths are resolved elsewhere."},
	{"429", "rate limit exceeded, retry after <*> seconds",
		"%s was rate limited after several calls in a row with %s",
		"When %s answers 429, wait the seconds the error names before the next call; batch %s instead of looping."},
	{"422", "validation failed: field <*> must be <*>",
		"%s rejected the call because %s had the wrong shape",
		"Give %s the %s in the shape the validation error states (ISO 8601 dates, integer cents, lowercase enums)."},
	{"401", "authentication required: token expired at <*>",
		"%s refused the call: the session token used for %s had expired",
		"After a 401 from %s, refresh the session first and retry once with %s unchanged."},
	{"409", "conflict: <*> was modified by another writer",
		"%s refused the update: %s had changed since it was read",
		"On a 409 from %s, read %s again and reapply the change to the version returned."},
	{"42P01", "relation <*> does not exist",
		"%s failed because %s named a table in the wrong schema",
		"Qualify %s with its schema when calling %s; the default search path does not include it."},
	{"timeout", "deadline exceeded after <*> ms",
		"%s timed out while %s covered too many rows",
		"Narrow %s with a filter or a page size before calling %s; unbounded calls time out."},
	{"400", "invalid argument <*>: expected one of <*>",
		"%s rejected %s: the value was not one of the allowed ones",
		"Read the allowed values from the error of %s and pass %s as one of them, never a free-form string."},
}

var argNames = []string{"`path`", "`owner`", "`repo`", "`body`", "`query`", "`limit`", "`channel`", "`amount`",
	"`customer_id`", "`namespace`", "`object_name`", "`bucket`", "`branch`", "`title`", "`due_date`", "`selector`",
	"`page_token`", "`content`", "`table`", "`schema`", "`replicas`", "`url`", "`status`", "`labels`"}

var caveats = []string{"", " This holds for every environment.", " Staging behaves the same.",
	" The error message names the limit.", " Retrying unchanged never helps.", " Check the listing first.",
	" Prefer the batch variant when there is one.", " Keep the original order.", " Log the id returned.",
	" The dry-run flag shows the effect first.", " Larger pages are slower but fewer."}

// namespaceOf returns the name of namespace i.
func namespaceOf(i int) string { return fmt.Sprintf("team-%d", i) }

// lesson returns the i-th generated lesson (deterministic in i and seed).
func lesson(i, namespaces int, seed uint64, now time.Time) *hindsight.Experience {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	srv := servers[r.IntN(len(servers))]
	tool := srv.tools[r.IntN(len(srv.tools))]
	t := templates[r.IntN(len(templates))]
	arg := argNames[r.IntN(len(argNames))]
	created := now.Add(-time.Duration(r.IntN(120*24)) * time.Hour)
	e := &hindsight.Experience{
		ID:            fmt.Sprintf("L%07d", i),
		Version:       1,
		Namespace:     namespaceOf(r.IntN(namespaces)),
		Server:        srv.name,
		Tool:          tool,
		TaskType:      srv.name + "-task",
		ErrorCode:     t.code,
		ErrorTemplate: t.tmpl,
		Situation:     fmt.Sprintf(t.situation, tool, arg) + fmt.Sprintf(" (seen on %s runs)", variant(r)),
		Action:        fmt.Sprintf("retried %s with %s changed", tool, arg),
		Result:        "the call succeeded",
		Lesson:        fmt.Sprintf(t.lesson, tool, arg) + caveats[r.IntN(len(caveats))],
		Confidence:    0.55 + 0.4*r.Float64(),
		SourceTask:    fmt.Sprintf("task-%07d", i),
		SourceSteps:   []int{1 + r.IntN(5), 6 + r.IntN(5)},
		EvidenceCount: 1 + r.IntN(5),
		CreatedAt:     created,
		UpdatedAt:     created,
		SourceAgent:   "teamload",
		Origin:        "rules",
	}
	return e
}

// variant returns a short identifier-like word (a run's, a branch's), so
// that lessons of one template differ in their text.
func variant(r *rand.Rand) string {
	words := []string{"nightly", "release", "canary", "backfill", "migration", "audit", "onboarding", "billing",
		"sync", "report", "deploy", "triage", "import", "export", "cleanup", "rollout"}
	return words[r.IntN(len(words))] + "-" + strings.ToLower(fmt.Sprintf("%x", r.Uint32()&0xffff))
}

// situationText returns a query an agent in lesson e's situation would
// ask query_hindsight.
func situationText(e *hindsight.Experience) string {
	return e.Tool + " failed: " + strings.ReplaceAll(e.ErrorTemplate, "<*>", "x")
}
