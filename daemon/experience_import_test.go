package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/memory"
)

const (
	packSecret = tasktest.HostileSecret
	future     = tasktest.HostileFuture
)

var hostileLine = tasktest.HostileLine

// TestAPIImportUntrusted imports a hostile pack through the daemon's API:
// what is stored is clamped and cleaned, a local lesson with the same id
// is not replaced, and a pack with bad lines names them and stores
// nothing.
func TestAPIImportUntrusted(t *testing.T) {
	ctx := context.Background()
	st := openEmbedded(t)
	c := startServer(t, &Server{Store: st, StoreName: "embedded", Namespace: "mine"})
	local := &hindsight.Experience{ID: "local-lesson", Namespace: "mine", Tool: "read_file",
		Situation: "reading", Lesson: "Use absolute paths.", Confidence: 0.9, EvidenceCount: 3, Origin: "rules"}
	if err := st.Put(ctx, local); err != nil {
		t.Fatal(err)
	}
	res, err := c.ImportWith(ctx, strings.NewReader(hostileLine("e1")+"\n"+hostileLine("local-lesson")), ImportOptions{Pack: "team"})
	if err != nil || res.Imported != 1 || res.Skipped != 1 || len(res.Kept) != 1 || res.Redactions == 0 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	e, err := c.Experience(ctx, "mine", "e1")
	if err != nil {
		t.Fatalf("the import did not land in the importer's namespace: %v", err)
	}
	b, _ := json.Marshal(e)
	// The pack's future dates are not kept (a substring test would also
	// find "2099" in the nanoseconds of today's).
	if strings.Contains(string(b), packSecret) || strings.Contains(string(b), "\\u001b") || e.CreatedAt.Year() >= 2099 ||
		e.UpdatedAt.Year() >= 2099 || (e.LastHitAt != nil && e.LastHitAt.Year() >= 2099) {
		t.Errorf("stored: %s", b)
	}
	if e.Confidence > ImportConfidenceCap || e.SupersededBy != "" || e.Origin != "import:team" || e.ImportedEvidence != 40 || e.EvidenceCount != 0 {
		t.Errorf("stored: %s", b)
	}
	if _, err := c.Experience(ctx, "victim-team", "e1"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Errorf("the file's namespace was used: %v", err)
	}
	kept, _ := c.Experience(ctx, "mine", "local-lesson")
	if kept.Lesson != local.Lesson || kept.Origin != "rules" {
		t.Errorf("a pack replaced a local lesson: %+v", kept)
	}

	// Provenance filters.
	for _, tc := range []struct {
		prov Provenance
		want string
	}{
		{Provenance{Origin: "import"}, "e1"},
		{Provenance{Origin: "import:team"}, "e1"},
		{Provenance{Origin: "import:other"}, ""},
		{Provenance{Origin: "rules"}, "local-lesson"},
		{Provenance{SourceAgent: "claude"}, "e1"},
		{Provenance{Origin: "rules", SourceAgent: "claude"}, ""},
	} {
		list, err := c.ExperiencesBy(ctx, hindsight.ListOptions{}, tc.prov)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range list {
			ids = append(ids, e.ID)
		}
		if strings.Join(ids, ",") != tc.want {
			t.Errorf("list %+v = %v, want %q", tc.prov, ids, tc.want)
		}
		found, err := c.SearchBy(ctx, SearchRequest{Query: hindsight.Query{Text: "read_file absolute path", K: 5, NoHit: true}, Provenance: tc.prov})
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, e := range found {
			ids = append(ids, e.ID)
		}
		if strings.Join(ids, ",") != tc.want {
			t.Errorf("search %+v = %v, want %q", tc.prov, ids, tc.want)
		}
	}

	// Bad lines: every one is named, nothing is stored.
	bad := hostileLine("n1") + hostileLine("n2") + "{not json\n" + hostileLine("n3") + `{"id":"n4","lesson":"l","confidence":7}` + "\n"
	_, err = c.Import(ctx, strings.NewReader(bad))
	var ae *APIError
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, "line 3:") || !strings.Contains(ae.Message, "line 5:") || strings.Contains(ae.Message, "line 4:") {
		t.Fatalf("bad pack: %v; want lines 3 and 5 named", err)
	}
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		if _, err := c.Experience(ctx, "", id); !errors.Is(err, hindsight.ErrNotFound) {
			t.Errorf("%s stored from a pack with bad lines: %v", id, err)
		}
	}
}

// TestImportBatched imports a pack into the embedded store, which takes
// it in parts of importPart: an id met twice (new, then changed, in the
// same part and in the next) is inserted and then updated, an id of a
// local lesson is kept, and every imported lesson is found by its text.
func TestImportBatched(t *testing.T) {
	ctx := context.Background()
	st := openEmbedded(t)
	local := &hindsight.Experience{ID: "local-1", Situation: "a local lesson", Lesson: "keep me"}
	if err := st.Put(ctx, local); err != nil {
		t.Fatal(err)
	}
	c := startServer(t, &Server{Store: st, StoreName: "embedded"})
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	n := importPart + 300
	var pack strings.Builder
	for i := range n {
		pack.WriteString(tasktest.ExperienceLine(fmt.Sprintf("p%05d", i), "tool_"+strconv.Itoa(i%13),
			fmt.Sprintf("Call tool_%d with the wombat%d flag.", i%13, i), day))
		switch i {
		case 10:
			pack.WriteString(tasktest.ExperienceLine("p00003", "tool_3", "Call tool_3 with the numbat flag.", day))
		case importPart + 10:
			pack.WriteString(tasktest.ExperienceLine(fmt.Sprintf("p%05d", importPart-5), "tool_1", "Call tool_1 with the dingo flag.", day))
		}
	}
	pack.WriteString(tasktest.ExperienceLine("local-1", "x", "Overwrite the local lesson.", day))
	res, err := c.Import(ctx, strings.NewReader(pack.String()))
	if err != nil || res.Imported != n || res.Updated != 2 || res.Skipped != 1 || len(res.Errors) != 0 {
		t.Fatalf("import = %+v, %v; want %d imported, 2 updated, 1 skipped", res, err, n)
	}
	if e, err := c.Experience(ctx, "", fmt.Sprintf("p%05d", importPart-5)); err != nil || !strings.Contains(e.Lesson, "dingo") || e.Version != 2 {
		t.Fatalf("the id met twice across parts: %+v, %v", e, err)
	}
	for _, i := range []int{0, 1, 10, 11, importPart, n - 1} {
		id := fmt.Sprintf("p%05d", i)
		found, err := c.Search(ctx, hindsight.Query{Text: fmt.Sprintf("wombat%d", i), K: 1, NoHit: true})
		if err != nil || len(found) != 1 || found[0].ID != id {
			t.Fatalf("search for %s: %+v, %v", id, found, err)
		}
	}
	if e, err := c.Experience(ctx, "", "p00003"); err != nil || !strings.Contains(e.Lesson, "numbat") || e.Version != 2 {
		t.Fatalf("the id met twice: %+v, %v", e, err)
	}
	if e, err := c.Experience(ctx, "", "local-1"); err != nil || e.Lesson != "keep me" {
		t.Fatalf("the local lesson: %+v, %v", e, err)
	}
}

// importPart is the part size the memory service imports in.
const importPart = memory.ImportPart
