package capture

import (
	"reflect"
	"slices"
	"testing"

	"github.com/zricethezav/gitleaks/v8/config"
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
	// Generic findings that gitleaks' allowlists (stop words, regexes)
	// keep or drop.
	texts = append(texts, `api_key = "Zx81kQ2vLm09Tr55Wq"`, `api_key = "example_client_secret_1234"`,
		`password: "changeme-changeme"`, `token = "${SECRET_TOKEN_FROM_ENV}"`, `secret = "q8Fh2LmN0pRt5VwY9zXc"`)
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

// TestGitleaksAllowlistFields: lightAllowlists copies every exported field
// of a gitleaks Allowlist; a new one (a gitleaks upgrade) must be copied
// too, or the allowlists would silently check less.
func TestGitleaksAllowlistFields(t *testing.T) {
	var got []string
	typ := reflect.TypeOf(config.Allowlist{})
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() {
			got = append(got, f.Name)
		}
	}
	want := []string{"Description", "MatchCondition", "Commits", "Paths", "RegexTarget", "Regexes", "StopWords"}
	if !slices.Equal(got, want) {
		t.Errorf("gitleaks Allowlist has fields %v; lightAllowlists copies %v", got, want)
	}
}
