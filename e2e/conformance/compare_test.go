package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScenarioOf(t *testing.T) {
	for dir, want := range map[string]string{
		"server-server-sse-polling-2026-12-06T21-52-56-918Z":                "server-sse-polling",
		"server-input-required-result-multi-round-2026-01-02T03-04-05-006Z": "input-required-result-multi-round",
		"server-ping":                          "",
		"client-ping-2026-12-06T21-52-56-918Z": "",
	} {
		got, ok := scenarioOf(dir)
		if got != want || ok != (want != "") {
			t.Errorf("scenarioOf(%q) = %q, %v; want %q", dir, got, ok, want)
		}
	}
}

// TestLosses: a check that passed directly and failed, warned or is missing
// through Hindsight is a loss; repeated ids are told apart by occurrence;
// checks that failed directly are not compared.
func TestLosses(t *testing.T) {
	direct := run{
		"a": {{ID: "x", Status: "SUCCESS"}, {ID: "x", Status: "SUCCESS"}, {ID: "y", Status: "FAILURE"}},
		"b": {{ID: "z", Status: "SUCCESS"}},
		"c": {{ID: "w", Status: "SUCCESS"}},
	}
	through := run{
		"a": {{ID: "x", Status: "SUCCESS"}, {ID: "x", Status: "WARNING", ErrorMessage: "no retry field"}, {ID: "y", Status: "FAILURE"}},
		"c": {{ID: "w", Status: "SUCCESS"}, {ID: "extra", Status: "FAILURE"}},
	}
	var got []string
	for _, l := range losses(direct, through) {
		got = append(got, l.String())
	}
	want := []string{"a: x#2: WARNING: no retry field", "b: z: missing"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("losses:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tab := table("2025-11-25", direct, through, map[string]bool{"a": true}, losses(direct, through))
	for _, s := range []string{"3 scenarios, 2 scored", "direct                       2/2       4/5", "through hindsight serve      1/2       2/5", "a    ", "b    "} {
		if !strings.Contains(tab, s) {
			t.Errorf("table lacks %q:\n%s", s, tab)
		}
	}
	if strings.Contains(tab, "c    ") {
		t.Errorf("table lists scenario c, which lost nothing:\n%s", tab)
	}
}

// TestReadRun reads the last run of a scenario and only the verdicts.
func TestReadRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "checks.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("server-ping-2026-12-06T21-52-56-918Z", `[{"id":"ping","status":"FAILURE"}]`)
	write("server-ping-2026-12-06T21-53-00-001Z", `[{"id":"req","status":"INFO"},{"id":"ping","status":"SUCCESS"}]`)
	r, err := readRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cs := r["ping"]; len(r) != 1 || len(cs) != 1 || cs[0].Status != "SUCCESS" {
		t.Errorf("readRun = %+v, want ping's second run without its INFO entry", r)
	}
}

func FuzzParseChecks(f *testing.F) {
	f.Add([]byte(`[{"id":"a","status":"SUCCESS"},{"id":"b","status":"INFO"}]`))
	f.Add([]byte(`[{"id":"a","status":"FAILURE","errorMessage":"x","details":{"n":1}}]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := parseChecks(b)
		if err != nil {
			return
		}
		for _, c := range cs {
			if !c.scored() {
				t.Fatalf("parseChecks kept an INFO entry: %+v", c)
			}
		}
		keyed(cs)
	})
}

func FuzzScenarioOf(f *testing.F) {
	f.Add("server-server-sse-polling-2026-12-06T21-52-56-918Z")
	f.Add("server--2026-12-06T21-52-56-918Z")
	f.Fuzz(func(t *testing.T, dir string) {
		sc, ok := scenarioOf(dir)
		if ok && !strings.HasPrefix(dir, "server-"+sc+"-") {
			t.Fatalf("scenarioOf(%q) = %q, not the folder's middle", dir, sc)
		}
	})
}
