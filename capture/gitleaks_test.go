package capture

import (
	"fmt"
	"reflect"
	"regexp"
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
		var got []string
		for _, f := range set.detect(text) {
			got = append(got, f.RuleID+"="+f.Secret)
		}
		slices.Sort(got)
		got = slices.Compact(got)
		want := findingKeys(full.DetectString(text))
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

// findTestRules are rules using what the default rule set may use and its
// texts do not exercise: a composite rule, an AND allowlist, allowlists
// on the line and on the match, a rule with a path, entropy.
func findTestRules() (rules map[string]config.Rule, allow []*config.Allowlist) {
	one := 1
	re := regexp.MustCompile
	rules = map[string]config.Rule{
		"tok": {RuleID: "tok", Regex: re(`(?i)token[=:]\s*([a-z0-9]{8,})`), SecretGroup: 1, Entropy: 2,
			Allowlists: []*config.Allowlist{
				{RegexTarget: "line", Regexes: []*regexp.Regexp{re(`#\s*example`)}},
				{MatchCondition: config.AllowlistMatchAnd, Regexes: []*regexp.Regexp{re(`^zz`)}, StopWords: []string{"abc"}},
				{RegexTarget: "match", Regexes: []*regexp.Regexp{re(`TOKEN:`)}},
			}},
		"user": {RuleID: "user", Regex: re(`user=([a-z]+)\n?`), RequiredRules: []*config.Required{{RuleID: "pass", WithinLines: &one}}},
		"pass": {RuleID: "pass", Regex: re(`pass=([a-z0-9]+)`), Keywords: []string{"pass"}},
		"file": {RuleID: "file", Regex: re(`key=(\w+)`), Path: re(`\.env$`)},
		"any":  {RuleID: "any", Regex: re(`(?:k1|k2)=(\w*)|v=(\w+)`)},
	}
	allow = []*config.Allowlist{{StopWords: []string{"dummy"}}}
	return rules, allow
}

// checkFindLikeDetector holds compiledRule.find, for each rule of
// findTestRules, to gitleaks' Detector running that rule alone on text.
func checkFindLikeDetector(t *testing.T, text string) int {
	rules, allow := findTestRules()
	n := 0
	for _, id := range []string{"tok", "user", "file", "any"} {
		r := rules[id]
		c := &compiledRule{rule: r, required: map[string]config.Rule{"pass": rules["pass"]}}
		det := detect.NewDetector(config.Config{Rules: map[string]config.Rule{id: r, "pass": rules["pass"]},
			Keywords: map[string]struct{}{}, OrderedRules: []string{id}, Allowlists: allow})
		var want, got []string
		for _, f := range det.DetectString(text) {
			want = append(want, fmt.Sprintf("%s %q %q %q %d:%d", f.RuleID, f.Secret, f.Match, f.Line, f.StartLine, f.StartColumn))
		}
		for _, f := range c.find(text, allow) {
			got = append(got, fmt.Sprintf("%s %q %q %q %d:%d", f.RuleID, f.Secret, f.Match, f.Line, f.StartLine, f.StartColumn))
		}
		if !slices.Equal(got, want) {
			t.Errorf("rule %s in %q:\n got %q\nwant %q", id, text, got, want)
		}
		n += len(want)
	}
	return n
}

// TestGitleaksFindLikeDetector: the redactor's own run of a rule finds
// what gitleaks' Detector finds, where and on which line.
func TestGitleaksFindLikeDetector(t *testing.T) {
	n := 0
	for _, text := range findTexts {
		n += checkFindLikeDetector(t, text)
	}
	if n < 10 {
		t.Errorf("gitleaks found %d secrets in the texts: the comparison proves little", n)
	}
}

var findTexts = []string{
	"token=q8Fh2LmN0pRt",
	"first\nsecond token: Zx81kQ2vLm09\nthird",
	"a\n\ntoken=aaaaaaaaaaaa and token=Ab3De6Gh9Jk2",
	"token=Ab3De6Gh9Jk2 # example\n",
	"token=Ab3De6Gh9Jk2 gitleaks:allow",
	"TOKEN:Ab3De6Gh9Jk2",
	"token=zzabc12345678 token=zzq81234567 token=abc9876543x2",
	"token=dummy1234567x",
	"user=alice\npass=s3cret\nuser=bob\n\n\npass=x",
	"user=carol pass=y",
	"pass=only",
	"user=dave\n",
	"key=abcdef",
	"k1= v=zz\r\nk2=abc",
	"x\r\ntoken=\nQw3rTy7uI0pZ",
}

func FuzzGitleaksFindLikeDetector(f *testing.F) {
	for _, text := range findTexts {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkFindLikeDetector(t, text)
	})
}
