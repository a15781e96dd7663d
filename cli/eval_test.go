package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/eval"
)

// TestEvalPerCorpus: several corpora give one row each, and --json an
// array whose reports equal each corpus's own run.
func TestEvalPerCorpus(t *testing.T) {
	const tb, syn = "../testdata/toolbench", "../testdata/corpus"
	code, out, errOut := runCLI(t, "eval", tb, syn)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "CORPUS") || !strings.HasPrefix(lines[1], tb) || !strings.HasPrefix(lines[2], syn) {
		t.Fatalf("rows:\n%s", out)
	}
	code, out, errOut = runCLI(t, "eval", "--json", tb, syn)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var runs []struct {
		Corpus string      `json:"corpus"`
		Report eval.Report `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 2 || runs[0].Corpus != tb || runs[1].Corpus != syn {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	code, out, _ = runCLI(t, "eval", "--json", tb)
	var one eval.Report
	if err := json.Unmarshal([]byte(out), &one); code != 0 || err != nil {
		t.Fatalf("one corpus: exit %d, %v", code, err)
	}
	if one.Recall != runs[0].Report.Recall || one.LessonsStored != runs[0].Report.LessonsStored || one.TokenShare != runs[0].Report.TokenShare {
		t.Errorf("one corpus %+v, among two %+v", one, runs[0].Report)
	}
	if runs[1].Report.Tasks != 60 || runs[1].Report.LessonsOneOff != 0 {
		t.Errorf("synthetic corpus row %+v", runs[1].Report)
	}
}
