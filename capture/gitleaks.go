package capture

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
	"github.com/rs/zerolog"
	"github.com/zricethezav/gitleaks/v8/config"
	gllog "github.com/zricethezav/gitleaks/v8/logging"
)

// gitleaksRules is the gitleaks default rule set, each rule run only on
// text holding one of its keywords, which a keywordIndex finds (gitleaks'
// own Detector builds an Aho-Corasick automaton of ~1.5 MB for that). The
// rules run as gitleaks' Detector runs them (see compiledRule.find), not
// through its detect package, which would link its file, archive and git
// scanning and their dependencies into every binary that records. A
// rule's expressions are compiled the first time text holds one of its
// keywords: most
// traffic never reaches most rules, and compiling all 200-odd of them at
// once allocated ~20 MB. Its allowlists are kept without the automata
// gitleaks builds for their stop words: a finding's secret is checked
// against each stop word instead, which costs microseconds per finding,
// and findings are rare.
type gitleaksRules struct {
	// Config is the default configuration as gitleaks translates it,
	// except that its rules' Regex never matches and their Path is nil
	// (see compile).
	Config  config.Config
	sources map[string]ruleSource // rule id → its expressions, not compiled
	rules   []gitleaksRule
	index   *keywordIndex // every rule keyword, each with a bit (see byBit)
	byBit   [64][]int     // bit → the rules with a keyword carrying it
}

// ruleSource is a rule's expressions as the rule file writes them.
type ruleSource struct{ regex, path string }

// gitleaksRule is one rule of the set, compiled on first use.
type gitleaksRule struct {
	id       string
	keywords []string // lower-cased
	once     sync.Once
	compiled *compiledRule
}

// gitleaksDetector loads the gitleaks default configuration once per
// process, on the first text holding one of its keywords, without
// compiling its rules (see gitleaksRules).
var gitleaksDetector = sync.OnceValues(func() (*gitleaksRules, error) {
	// gitleaks logs through a global zerolog logger to stderr, at trace
	// level with the secrets it skips: silence it.
	gllog.Logger = gllog.Logger.Level(zerolog.Disabled)
	cfg, sources, err := defaultGitleaksConfig()
	if err != nil {
		return nil, fmt.Errorf("load gitleaks rules: %w", err)
	}
	cfg.Allowlists = lightAllowlists(cfg.Allowlists)
	for id, rule := range cfg.Rules {
		rule.Allowlists = lightAllowlists(rule.Allowlists)
		cfg.Rules[id] = rule
	}
	set := &gitleaksRules{Config: cfg, sources: sources, index: &keywordIndex{}}
	if err := checkKeywords(set, gitleaksKeywords); err != nil {
		return nil, err
	}
	for n, k := range gitleaksKeywords {
		set.index.add(k, 1<<(n%64))
	}
	set.rules = make([]gitleaksRule, 0, len(cfg.OrderedRules))
	for _, id := range cfg.OrderedRules {
		rule, ok := cfg.Rules[id]
		if !ok || len(rule.Keywords) == 0 {
			continue // matches file paths only: never on text
		}
		i := len(set.rules)
		set.rules = append(set.rules, gitleaksRule{id: id})
		for _, k := range rule.Keywords {
			k = strings.ToLower(k)
			set.rules[i].keywords = append(set.rules[i].keywords, k)
			bits := set.index.find(k, 0)
			for b := range 64 {
				if bits&(1<<b) != 0 && !containsInt(set.byBit[b], i) {
					set.byBit[b] = append(set.byBit[b], i)
				}
			}
		}
	}
	return set, nil
})

// defaultGitleaksConfig is detect.NewDetectorDefaultConfig's configuration,
// without building its detector, its rules' expressions (returned as
// sources, by rule id; see uncompiledRule) or its stop-word automata.
// gitleaks reads its rule file through viper; the same file is decoded
// here straight into config.ViperConfig (TestGitleaksConfigLikeViper holds
// the result, compiled, to gitleaks' own).
func defaultGitleaksConfig() (config.Config, map[string]ruleSource, error) {
	var vc config.ViperConfig
	if err := toml.Unmarshal([]byte(config.DefaultConfig), &vc); err != nil {
		return config.Config{}, nil, fmt.Errorf("decode gitleaks rules: %w", err)
	}
	sources := make(map[string]ruleSource, len(vc.Rules))
	for i := range vc.Rules {
		r := &vc.Rules[i]
		sources[r.ID] = ruleSource{regex: r.Regex, path: r.Path}
		// Translate wants a rule to have one expression at least, with
		// its secret's group.
		r.Regex, r.Path = uncompiledRule+strings.Repeat("()", r.SecretGroup), ""
	}
	stops := holdStopWords(&vc)
	cfg, err := vc.Translate()
	if err != nil {
		return config.Config{}, nil, err
	}
	stops.restore(&cfg)
	return cfg, sources, nil
}

// uncompiledRule begins the expression of every rule until compile: one
// that never matches and costs nothing to compile (followed by as many
// empty groups as the rule's secret group needs).
const uncompiledRule = `\z\A.`

// compile returns rule id with its expressions compiled, as Translate
// compiles them (a bad expression panics there too; the rule file is
// compiled into the binary and TestGitleaksConfigLikeViper compiles all).
func (g *gitleaksRules) compile(id string) config.Rule {
	rule := g.Config.Rules[id]
	src := g.sources[id]
	rule.Regex, rule.Path = nil, nil
	if src.regex != "" {
		rule.Regex = regexp.MustCompile(src.regex)
	}
	if src.path != "" {
		rule.Path = regexp.MustCompile(src.path)
	}
	return rule
}

// rule returns rule i compiled, compiling it on first use. The rules it
// requires (composite rules) run only as its parts.
func (g *gitleaksRules) rule(i int) *compiledRule {
	r := &g.rules[i]
	r.once.Do(func() {
		c := &compiledRule{rule: g.compile(r.id), required: map[string]config.Rule{}}
		for _, req := range c.rule.RequiredRules {
			if _, ok := g.Config.Rules[req.RuleID]; ok {
				c.required[req.RuleID] = g.compile(req.RuleID)
			}
		}
		r.compiled = c
	})
	return r.compiled
}

// lightAllowlists copies allowlists without what gitleaks derived from
// them when it validated them (an automaton of the stop words, joined
// expressions, a map of commits): its checks fall back to the lists
// themselves, which are already deduplicated and lower-cased.
// TestGitleaksAllowlistFields notices a field this does not copy.
func lightAllowlists(in []*config.Allowlist) []*config.Allowlist {
	out := make([]*config.Allowlist, len(in))
	for i, a := range in {
		out[i] = &config.Allowlist{Description: a.Description, MatchCondition: a.MatchCondition, Commits: a.Commits,
			Paths: a.Paths, RegexTarget: a.RegexTarget, Regexes: a.Regexes, StopWords: a.StopWords}
	}
	return out
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// detect returns what the rules whose keywords text holds find in it, as
// gitleaks' Detector.DetectString would: a generic rule's finding gives way
// to a specific rule's finding on the same line that contains its secret.
func (g *gitleaksRules) detect(text string) []gitleaksFinding {
	bits := g.index.find(text, 0)
	if bits == 0 {
		return nil
	}
	var lower string
	var findings []gitleaksFinding
	var ran []bool
	for b := range 64 {
		if bits&(1<<b) == 0 {
			continue
		}
		for _, i := range g.byBit[b] {
			if ran == nil {
				ran = make([]bool, len(g.rules))
			}
			if ran[i] {
				continue
			}
			ran[i] = true
			if lower == "" {
				lower = strings.ToLower(text)
			}
			if g.rules[i].holdsKeyword(lower) {
				findings = append(findings, g.rule(i).find(text, g.Config.Allowlists)...)
			}
		}
	}
	return preferSpecific(findings)
}

func (r *gitleaksRule) holdsKeyword(lower string) bool {
	for _, k := range r.keywords {
		if strings.Contains(lower, k) {
			return true
		}
	}
	return false
}

// preferSpecific drops each generic rule's finding that a specific rule's
// finding on the same line contains, as gitleaks does across its rules.
func preferSpecific(findings []gitleaksFinding) []gitleaksFinding {
	out := findings[:0:0]
	for _, f := range findings {
		keep := true
		if strings.Contains(strings.ToLower(f.RuleID), "generic") {
			for _, g := range findings {
				if f.StartLine == g.StartLine && f.RuleID != g.RuleID && strings.Contains(g.Secret, f.Secret) &&
					!strings.Contains(strings.ToLower(g.RuleID), "generic") {
					keep = false
					break
				}
			}
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}

// checkKeywords reports an error unless every rule of set either matches
// file paths only or has keywords, all of them in known: the prefilter
// skips gitleaks on text without one of known.
func checkKeywords(set *gitleaksRules, known []string) error {
	have := make(map[string]bool, len(known))
	for _, k := range known {
		have[strings.ToLower(k)] = true
	}
	for id, rule := range set.Config.Rules {
		if len(rule.Keywords) == 0 && set.sources[id].regex != "" {
			return fmt.Errorf("load gitleaks rules: rule %s has no keyword; the prefilter cannot skip it", id)
		}
		for _, k := range rule.Keywords {
			if !have[strings.ToLower(k)] {
				return fmt.Errorf("load gitleaks rules: rule %s: keyword %q missing from the prefilter", id, k)
			}
		}
	}
	return nil
}

// detector returns the gitleaks rules. It panics when they cannot be
// loaded (they are compiled into the binary, so only a broken build can):
// BuildStep's caller then loses the step rather than storing text that was
// not scanned.
func (r *Redactor) detector() *gitleaksRules {
	set, err := gitleaksDetector()
	if err != nil {
		panic(err)
	}
	return set
}

// gitleaksBit marks the gitleaks keywords in a keywordIndex.
const gitleaksBit = 1 << 63

// gitleaksKeywords are the keywords of the gitleaks default rules, read
// from the rule file compiled into gitleaks without compiling the rules
// (checkKeywords holds them to the compiled rules).
var gitleaksKeywords = func() []string {
	var out []string
	for _, m := range keywordsLine.FindAllStringSubmatch(config.DefaultConfig, -1) {
		for _, q := range tomlString.FindAllStringSubmatch(m[1], -1) {
			out = append(out, q[1]+q[2])
		}
	}
	return out
}()

var (
	keywordsLine = regexp.MustCompile(`(?m)^\s*keywords\s*=\s*\[([^\]]*)\]`)
	tomlString   = regexp.MustCompile(`"([^"\\]*)"|'([^']*)'`)
)
