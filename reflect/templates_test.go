package reflect

import (
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
)

// projectTask is a task whose first create_issue fails because its
// project (a plain word, which masking alone keeps) does not exist.
func projectTask(id, project string) *hindsight.Task {
	return newTrace(id).
		list(`[{"name":"create_issue"}]`).
		fail("create_issue", `{"project":"`+project+`"}`, "project not found: "+project, "404").
		ok("create_issue", `{"project":"core"}`, `{"issue":"ISS-1"}`).build()
}

// projectKey is the miner key of projectTask's create_issue.
const projectKey = "shop\x00create_issue"

func TestTemplatesLearn(t *testing.T) {
	tpl, err := NewTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := projectTask("t-a", "apollo")
	if err := tpl.Learn(a); err != nil {
		t.Fatal(err)
	}
	// Only the failed tools/call step gets a template; the first of its
	// error is the error itself.
	for i, s := range a.Steps {
		want := ""
		if i == 1 {
			want = "project not found: apollo"
		}
		if s.ErrorTemplate != want {
			t.Errorf("step %d (%s %s): template %q, want %q", i, s.Method, s.Tool, s.ErrorTemplate, want)
		}
	}
	// The same error with another value: the value becomes a wildcard.
	b := projectTask("t-b", "zeus")
	if err := tpl.Learn(b); err != nil {
		t.Fatal(err)
	}
	const general = "project not found: " + errtemplate.Wildcard
	if got := b.Steps[1].ErrorTemplate; got != general {
		t.Errorf("second task's template %q, want %q", got, general)
	}
	// The first task, read again, gets the template as it stands now.
	a2 := projectTask("t-a", "apollo")
	tpl.Annotate(a2)
	if got := a2.Steps[1].ErrorTemplate; got != general {
		t.Errorf("first task's template %q, want %q", got, general)
	}
	if cl := tpl.miner.Clusters(projectKey); len(cl) != 1 || cl[0].Size != 2 || cl[0].Template != general {
		t.Errorf("clusters %+v, want one of size 2", cl)
	}
	// Another tool's errors are another key: nothing generalises across.
	other := newTrace("t-c").fail("delete_issue", `{"project":"hermes"}`, "project not found: hermes", "404").build()
	if err := tpl.Learn(other); err != nil {
		t.Fatal(err)
	}
	if got := other.Steps[0].ErrorTemplate; got != "project not found: hermes" {
		t.Errorf("other tool's template %q", got)
	}
}

// TestTemplatesLearnWithinTask: two failures of one task that differ in a
// value both end with the wildcard, the first included.
func TestTemplatesLearnWithinTask(t *testing.T) {
	tpl, _ := NewTemplates(nil)
	task := newTrace("t-two").
		fail("create_issue", `{"project":"apollo"}`, "project not found: apollo", "404").
		fail("create_issue", `{"project":"zeus"}`, "project not found: zeus", "404").
		ok("create_issue", `{"project":"core"}`, `{"issue":"ISS-1"}`).build()
	if err := tpl.Learn(task); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		if got := task.Steps[i].ErrorTemplate; got != "project not found: <*>" {
			t.Errorf("step %d: template %q, want the wildcard", i, got)
		}
	}
}

// TestTemplatesPersist: what the miner learned survives closing and
// reopening the database.
func TestTemplatesPersist(t *testing.T) {
	dir := t.TempDir()
	open := func() *badger.DB {
		db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	tpl, err := NewTemplates(NewQueue(db, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []*hindsight.Task{projectTask("t-a", "apollo"), projectTask("t-b", "zeus")} {
		if err := tpl.Learn(task); err != nil {
			t.Fatal(err)
		}
	}
	before := tpl.miner.Clusters(projectKey)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = open()
	defer db.Close()
	again, err := NewTemplates(NewQueue(db, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	after := again.miner.Clusters(projectKey)
	if len(after) != 1 || len(before) != 1 || after[0] != before[0] {
		t.Fatalf("clusters after reopening %+v, want %+v", after, before)
	}
	// A task read after the restart gets the learned template…
	c := projectTask("t-c", "hermes")
	again.Annotate(c)
	if got := c.Steps[1].ErrorTemplate; got != "project not found: <*>" {
		t.Errorf("template after reopening %q", got)
	}
	// …and learning goes on from it: the cluster grows, no new one.
	if err := again.Learn(c); err != nil {
		t.Fatal(err)
	}
	if cl := again.miner.Clusters(projectKey); len(cl) != 1 || cl[0].Size != 3 || cl[0].ID != before[0].ID {
		t.Errorf("clusters after learning on %+v", cl)
	}
	// An empty database holds no state, and that is no error.
	fresh, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	empty, err := NewTemplates(NewQueue(fresh, nil, nil))
	if err != nil || len(empty.miner.Clusters(projectKey)) != 0 {
		t.Errorf("fresh database: %v, %+v", err, empty.miner.Clusters(projectKey))
	}
}

// TestTemplatesAnnotateDoesNotLearn: Annotate reads the miner and never
// changes it, and it masks what joins no cluster.
func TestTemplatesAnnotateDoesNotLearn(t *testing.T) {
	tpl, _ := NewTemplates(nil)
	if err := tpl.Learn(projectTask("t-a", "apollo")); err != nil {
		t.Fatal(err)
	}
	before := tpl.miner.Clusters(projectKey)
	for _, p := range []string{"zeus", "hermes", "athena"} {
		task := projectTask("t-"+p, p)
		tpl.Annotate(task)
		// It joins the cluster of one, whose template keeps the value
		// until a second error is learned.
		if got := task.Steps[1].ErrorTemplate; got != "project not found: apollo" {
			t.Errorf("%s: template %q", p, got)
		}
	}
	unknown := newTrace("t-u").fail("create_issue", `{}`, "quota exceeded for org 4411 until 2026-04-01", "429").build()
	tpl.Annotate(unknown)
	if got, want := unknown.Steps[0].ErrorTemplate, errtemplate.Mask("quota exceeded for org 4411 until 2026-04-01"); got != want || !strings.Contains(got, errtemplate.Wildcard) {
		t.Errorf("unknown error's template %q, want its masked text %q", got, want)
	}
	after := tpl.miner.Clusters(projectKey)
	if len(after) != len(before) || after[0] != before[0] {
		t.Errorf("clusters changed by Annotate: %+v, was %+v", after, before)
	}
}
