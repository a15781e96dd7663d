package capture

import (
	"slices"
	"testing"

	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/report"
)

// TestGitleaksRulesMatchDetector holds the per-rule detectors to gitleaks'
// own Detector: on every message of the secrets corpus and the typical
// payloads they find the same secrets under the same rule ids.
func TestGitleaksRulesMatchDetector(t *testing.T) {
	full, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	set, err := gitleaksDetector()
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, c := range loadCorpus(t) {
		texts = append(texts, string(c.Message))
	}
	for _, p := range typicalPayloads() {
		texts = append(texts, string(p))
	}
	found := 0
	for _, text := range texts {
		want, got := findingKeys(full.DetectString(text)), findingKeys(set.detect(text))
		if !slices.Equal(got, want) {
			t.Errorf("in %.80q: found %q, gitleaks %q", text, got, want)
		}
		found += len(want)
	}
	if found < 20 {
		t.Errorf("gitleaks found only %d secrets in the corpus: the comparison proves little", found)
	}
}

func findingKeys(fs []report.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.RuleID+"="+f.Secret)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
