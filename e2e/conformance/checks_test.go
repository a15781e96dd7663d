package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// check is one entry of a scenario's checks.json.
type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, SKIPPED or INFO
	ErrorMessage string `json:"errorMessage"`
	Description  string `json:"description"`
}

// scored reports whether c is a verdict (INFO entries log the traffic).
func (c check) scored() bool { return c.Status != "INFO" }

// run is what one suite run gave: the checks of each scenario.
type run map[string][]check

// notScored reads the scenarios a requirement set runs without scoring
// (its not_scored entries of the server leg) from the suite's
// requirements/<revision>.yaml.
func notScored(suiteDir, revision string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(suiteDir, "requirements", revision+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("read requirement set: %w", err)
	}
	var set struct {
		NotScored []struct{ Scenario, Leg string } `yaml:"not_scored"`
	}
	if err := yaml.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("parse requirement set %s: %w", revision, err)
	}
	m := map[string]bool{}
	for _, e := range set.NotScored {
		if e.Leg == "server" {
			m[e.Scenario] = true
		}
	}
	return m, nil
}

// resultDirRE is a scenario's result folder, server-<scenario>-<timestamp>.
var resultDirRE = regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$`)

// scenarioOf returns the scenario whose results the folder name holds.
func scenarioOf(dir string) (string, bool) {
	m := resultDirRE.FindStringSubmatch(dir)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// readRun reads the checks.json of every scenario folder under dir. A
// scenario run more than once keeps its last run (folders sort by time).
func readRun(dir string) (run, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	r := run{}
	for _, e := range ents {
		name, ok := scenarioOf(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			return nil, fmt.Errorf("read checks of %s: %w", name, err)
		}
		cs, err := parseChecks(b)
		if err != nil {
			return nil, fmt.Errorf("parse checks of %s: %w", name, err)
		}
		r[name] = cs
	}
	return r, nil
}

// parseChecks decodes a checks.json and keeps its verdicts.
func parseChecks(b []byte) ([]check, error) {
	var all []check
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	out := all[:0]
	for _, c := range all {
		if c.scored() {
			out = append(out, c)
		}
	}
	return out, nil
}

// keyed names each check by its id and, for an id that repeats in the
// scenario, its occurrence ("id#2").
func keyed(cs []check) map[string]check {
	m := make(map[string]check, len(cs))
	seen := map[string]int{}
	for _, c := range cs {
		seen[c.ID]++
		k := c.ID
		if n := seen[c.ID]; n > 1 {
			k = fmt.Sprintf("%s#%d", c.ID, n)
		}
		m[k] = c
	}
	return m
}

// loss is a check that passed directly and did not through Hindsight.
type loss struct {
	scenario, check string
	got             string // the status through Hindsight, or "missing"
	message         string
}

func (l loss) String() string {
	s := fmt.Sprintf("%s: %s: %s", l.scenario, l.check, l.got)
	if l.message != "" {
		s += ": " + l.message
	}
	return s
}

// losses compares two runs check by check, in scenario and check order.
func losses(direct, through run) []loss {
	var out []loss
	for _, sc := range sortedKeys(direct) {
		got := keyed(through[sc])
		want := keyed(direct[sc])
		for _, k := range sortedKeys(want) {
			if want[k].Status != "SUCCESS" {
				continue
			}
			c, ok := got[k]
			switch {
			case !ok:
				out = append(out, loss{scenario: sc, check: k, got: "missing"})
			case c.Status != "SUCCESS":
				out = append(out, loss{scenario: sc, check: k, got: c.Status, message: firstNonEmpty(c.ErrorMessage, c.Description)})
			}
		}
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// tally is the number of checks of a run that passed, and of all its
// verdicts, over the scenarios keep allows (nil: all).
func (r run) tally(keep func(scenario string) bool) (passed, total int) {
	for sc, cs := range r {
		if keep != nil && !keep(sc) {
			continue
		}
		for _, c := range cs {
			total++
			if c.Status == "SUCCESS" {
				passed++
			}
		}
	}
	return passed, total
}

// table is the comparison of one requirement set, as the test prints it:
// the checks passed of the scored scenarios (those not in notScored) and of
// all, directly and through Hindsight, and the scenarios that lose checks.
func table(revision string, direct, through run, notScored map[string]bool, lost []loss) string {
	var b strings.Builder
	scored := func(sc string) bool { return !notScored[sc] }
	n := 0
	for sc := range direct {
		if scored(sc) {
			n++
		}
	}
	fmt.Fprintf(&b, "requirement set %s: %d scenarios, %d scored\n", revision, len(direct), n)
	fmt.Fprintf(&b, "  %-28s %-9s %s\n", "checks passed", "scored", "all")
	for _, row := range []struct {
		name string
		r    run
	}{{"direct", direct}, {"through hindsight serve", through}} {
		fmt.Fprintf(&b, "  %-28s %-9s %s\n", row.name, fraction(row.r.tally(scored)), fraction(row.r.tally(nil)))
	}
	byScenario := map[string]int{}
	for _, l := range lost {
		byScenario[l.scenario]++
	}
	if len(byScenario) == 0 {
		b.WriteString("  scenarios that lose checks: none\n")
		return b.String()
	}
	b.WriteString("  scenarios that lose checks:\n")
	for _, sc := range sortedKeys(byScenario) {
		fmt.Fprintf(&b, "    %-44s direct %s, through %s\n", sc, scenarioFraction(direct[sc]), scenarioFraction(through[sc]))
	}
	return b.String()
}

func scenarioFraction(cs []check) string { return fraction(run{"": cs}.tally(nil)) }

func fraction(passed, total int) string { return fmt.Sprintf("%d/%d", passed, total) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
