package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

const (
	packSecret = tasktest.HostileSecret
	future     = tasktest.HostileFuture
)

var hostileLine = tasktest.HostileLine

func TestCleanImport(t *testing.T) {
	red, err := capture.NewRedactor(capture.RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	past := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		opt   ImportOptions
		edit  func(e *hindsight.Experience)
		check func(t *testing.T, e *hindsight.Experience, redactions int)
	}{
		{"dates clamped to now", ImportOptions{}, nil, func(t *testing.T, e *hindsight.Experience, _ int) {
			if !e.CreatedAt.Equal(now) || !e.UpdatedAt.Equal(now) || e.LastHitAt != nil {
				t.Errorf("dates %v %v %v, want now and no last hit", e.CreatedAt, e.UpdatedAt, e.LastHitAt)
			}
		}},
		{"past dates kept", ImportOptions{}, func(e *hindsight.Experience) { e.CreatedAt, e.UpdatedAt = past, past }, func(t *testing.T, e *hindsight.Experience, _ int) {
			if !e.CreatedAt.Equal(past) {
				t.Errorf("created_at %v, want %v", e.CreatedAt, past)
			}
		}},
		{"confidence capped", ImportOptions{}, nil, func(t *testing.T, e *hindsight.Experience, _ int) {
			if e.Confidence != ImportConfidenceCap {
				t.Errorf("confidence %v, want the cap %v", e.Confidence, ImportConfidenceCap)
			}
		}},
		{"low confidence kept", ImportOptions{}, func(e *hindsight.Experience) { e.Confidence = 0.3 }, func(t *testing.T, e *hindsight.Experience, _ int) {
			if e.Confidence != 0.3 {
				t.Errorf("confidence %v, want 0.3", e.Confidence)
			}
		}},
		{"trusted keeps confidence", ImportOptions{Trust: true}, nil, func(t *testing.T, e *hindsight.Experience, _ int) {
			if e.Confidence != 1 {
				t.Errorf("--trust: confidence %v, want 1", e.Confidence)
			}
		}},
		{"counts reset", ImportOptions{}, nil, func(t *testing.T, e *hindsight.Experience, _ int) {
			if e.EvidenceCount != 0 || e.HitCount != 0 || e.ImportedEvidence != 40 || e.Version != 0 {
				t.Errorf("evidence %d hits %d imported %d version %d; want 0 0 40 0", e.EvidenceCount, e.HitCount, e.ImportedEvidence, e.Version)
			}
		}},
		{"state and provenance are the importer's", ImportOptions{Namespace: "mine", Pack: "team"}, nil, func(t *testing.T, e *hindsight.Experience, _ int) {
			if e.Namespace != "mine" || e.SupersededBy != "" || e.Deleted || e.Origin != "import:team" || e.Embedder != "" {
				t.Errorf("namespace %q superseded_by %q deleted %v origin %q embedder %q", e.Namespace, e.SupersededBy, e.Deleted, e.Origin, e.Embedder)
			}
		}},
		{"deleted dropped", ImportOptions{}, func(e *hindsight.Experience) { e.Deleted = true }, func(t *testing.T, e *hindsight.Experience, _ int) {
			if e.Deleted || e.Origin != "import" {
				t.Errorf("deleted %v origin %q", e.Deleted, e.Origin)
			}
		}},
		{"escapes stripped, secrets redacted", ImportOptions{}, nil, func(t *testing.T, e *hindsight.Experience, n int) {
			all := strings.Join([]string{e.Server, e.Situation, e.Action, e.Lesson}, "|")
			if strings.ContainsAny(all, "\x1b\x07\u202e") || strings.Contains(all, "owned") || strings.Contains(all, packSecret) || n == 0 {
				t.Errorf("text %q (%d redactions)", all, n)
			}
			if e.Server != "fs" || e.Lesson != "Call read_file with an absolute path under /data." || !strings.Contains(e.Action, "[REDACTED") {
				t.Errorf("server %q lesson %q action %q", e.Server, e.Lesson, e.Action)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e hindsight.Experience
			if err := json.Unmarshal([]byte(hostileLine("e1")), &e); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(&e)
			}
			n, err := CleanImport(&e, tc.opt, red, now)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, &e, n)
		})
	}
}

func TestCleanImportRefuses(t *testing.T) {
	for _, line := range []string{
		`{"id":"x","lesson":""}`,
		`{"id":"a/b","lesson":"l"}`,
		`{"id":"a\u001bb","lesson":"l"}`,
		`{"id":"x","lesson":"\u001b[2J"}`,
		`{"id":"x","lesson":"l","confidence":1.5}`,
		`{"id":"x","lesson":"l","confidence":-1}`,
	} {
		var e hindsight.Experience
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if _, err := CleanImport(&e, ImportOptions{Trust: true}, nil, time.Now()); err == nil {
			t.Errorf("accepted %s", line)
		}
	}
}

// failAfter reads r, then fails with err instead of io.EOF.
type failAfter struct {
	r   io.Reader
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// TestImportFromReadError: a pack whose reading fails (a body over its
// limit, a client gone) imports nothing, even its whole lines before the
// failure, and the error is the reader's, not a bad line's; a pack read
// whole imports every line.
func TestImportFromReadError(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedder.NewLocal(0), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	red, _ := capture.NewRedactor(capture.RedactorConfig{})
	svc := &Service{Store: st, StoreName: "embedded", Redactor: red}
	var pack strings.Builder
	for i := range 5 {
		fmt.Fprintf(&pack, `{"id":"p%d","tool":"read_file","situation":"read_file failed with ENOENT %d","lesson":"Call read_file with an absolute path."}`+"\n", i, i)
	}
	tooLarge := &http.MaxBytesError{Limit: 10}
	_, err = svc.ImportFrom(ctx, &failAfter{strings.NewReader(pack.String()), tooLarge}, 0, ImportOptions{})
	var mbe *http.MaxBytesError
	if !errors.As(err, &mbe) {
		t.Fatalf("import error %v; want the reader's", err)
	}
	var ie *ImportError
	if errors.As(err, &ie) {
		t.Fatalf("a read error reported as bad lines: %v", err)
	}
	if _, err := st.Get(ctx, "", "p0"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("p0 after a failed read: %v; want not found", err)
	}
	res, err := svc.ImportFrom(ctx, strings.NewReader(pack.String()), -1, ImportOptions{})
	if err != nil || res.Imported != 5 {
		t.Fatalf("import read whole: %+v %v; want 5 imported", res, err)
	}
}

// TestCleanPackParts: lines of every size, one longer than a part, come
// back whole and in order, and each empties the pack.
func TestCleanPackParts(t *testing.T) {
	p := &cleanPack{}
	var want []string
	for i := range 3000 {
		e := hindsight.Experience{ID: fmt.Sprintf("e%d", i), Lesson: strings.Repeat("x", i%700)}
		if i == 1500 {
			e.Lesson = strings.Repeat("y", packPart+10)
		}
		b, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		p.add(b)
		want = append(want, e.ID+"/"+e.Lesson)
	}
	if p.n != 3000 || len(p.parts) < 3 {
		t.Fatalf("%d lines in %d parts; want 3000 in several", p.n, len(p.parts))
	}
	var got []string
	if err := p.each(func(e *hindsight.Experience) bool {
		got = append(got, e.ID+"/"+e.Lesson)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d experiences back; want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("experience %d: %.40q; want %.40q", i, got[i], want[i])
		}
	}
	for i, part := range p.parts {
		if part != nil {
			t.Fatalf("part %d kept after each", i)
		}
	}
}
