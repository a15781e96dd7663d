package capture

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/viper"
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

// TestGitleaksConfigLikeViper holds defaultGitleaksConfig's direct decoding
// of gitleaks' rule file to what gitleaks itself reads through viper: the
// same rules, keywords, allowlists and order.
func TestGitleaksConfigLikeViper(t *testing.T) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(config.DefaultConfig)); err != nil {
		t.Fatal(err)
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		t.Fatal(err)
	}
	want, err := vc.Translate()
	if err != nil {
		t.Fatal(err)
	}
	got, sources, err := defaultGitleaksConfig()
	if err != nil {
		t.Fatal(err)
	}
	set := &gitleaksRules{Config: got, sources: sources}
	for id, r := range got.Rules {
		if r.Regex == nil || !strings.HasPrefix(r.Regex.String(), uncompiledRule) || r.Path != nil {
			t.Fatalf("rule %s was compiled when loaded", id)
		}
		got.Rules[id] = set.compile(id)
	}
	// Translate collects stop words through a map (their order varies from
	// one call to the next) and builds automata for them; compare what
	// the redactor keeps of them (lightAllowlists).
	normalizeAllowlists(&got)
	normalizeAllowlists(&want)
	if len(got.Rules) < 100 || len(got.Allowlists) == 0 {
		t.Fatalf("decoded %d rules and %d global allowlists: the rule file was not read", len(got.Rules), len(got.Allowlists))
	}
	if !reflect.DeepEqual(got, want) {
		for id, r := range want.Rules {
			if !reflect.DeepEqual(got.Rules[id], r) {
				t.Errorf("rule %s differs:\n got %+v\nwant %+v", id, got.Rules[id], r)
			}
		}
		t.Fatalf("the configuration differs from viper's (rules %d vs %d, allowlists %d vs %d, order equal %v)",
			len(got.Rules), len(want.Rules), len(got.Allowlists), len(want.Allowlists), reflect.DeepEqual(got.OrderedRules, want.OrderedRules))
	}
}

func normalizeAllowlists(c *config.Config) {
	c.Allowlists = lightAllowlists(c.Allowlists)
	for _, a := range c.Allowlists {
		slices.Sort(a.StopWords)
	}
	for id, r := range c.Rules {
		r.Allowlists = lightAllowlists(r.Allowlists)
		for _, a := range r.Allowlists {
			slices.Sort(a.StopWords)
		}
		c.Rules[id] = r
	}
}
