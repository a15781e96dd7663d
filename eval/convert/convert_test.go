package convert

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/corpus"
)

// The sources are not part of the repository: see testdata/README.md for
// where to fetch them. With -update and a source's path, TestConvert
// writes its converted files under testdata/.
var (
	update       = flag.Bool("update", false, "write the converted corpora")
	liveMCPBench = flag.String("livemcpbench", "", "LiveMCPBench run (baseline/output/*.json)")
	toolBench    = flag.String("toolbench", "", "ToolBench data_example/answer directory")
)

// start is when the first converted task starts.
var start = time.Date(2026, 4, 6, 9, 0, 0, 0, time.UTC)

func TestConvert(t *testing.T) {
	if !*update {
		t.Skip("run with -update and the sources' paths to convert")
	}
	if *liveMCPBench != "" {
		data, err := os.ReadFile(*liveMCPBench)
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := LiveMCPBench(data)
		if err != nil {
			t.Fatal(err)
		}
		write(t, "livemcpbench", tasks, LiveMCPBenchClasses)
	}
	if *toolBench != "" {
		tasks, err := ToolBenchDir(*toolBench)
		if err != nil {
			t.Fatal(err)
		}
		write(t, "toolbench", tasks, ToolBenchClasses)
	}
}

func write(t *testing.T, name string, tasks []Task, cl Classifier) {
	steps, labels := Build(tasks, start, cl.Classify)
	dir := filepath.Join("..", "..", "testdata", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	traces, err := corpus.JSONLines(steps)
	if err != nil {
		t.Fatal(err)
	}
	labelLines, err := corpus.JSONLines(labels)
	if err != nil {
		t.Fatal(err)
	}
	for file, b := range map[string][]byte{corpus.TracesFile: traces, corpus.LabelsFile: labelLines} {
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d tasks, %d steps, %d failed", name, len(tasks), len(steps), len(labels))
}

// TestCommittedLabels: every failed call of each committed corpus has one
// frozen, non-empty label, and no label names a call that did not fail.
func TestCommittedLabels(t *testing.T) {
	for _, name := range []string{"livemcpbench", "toolbench"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "testdata", name)
			failed := map[string]bool{}
			eachJSON(t, filepath.Join(dir, "traces.jsonl"), func(b []byte) {
				var s struct {
					TaskID    string `json:"task_id"`
					StepIndex int    `json:"step_index"`
					IsError   bool   `json:"is_error"`
				}
				if err := json.Unmarshal(b, &s); err != nil {
					t.Fatal(err)
				}
				if s.IsError {
					failed[fmt.Sprint(s.TaskID, "#", s.StepIndex)] = true
				}
			})
			seen := map[string]bool{}
			eachJSON(t, filepath.Join(dir, "labels.jsonl"), func(b []byte) {
				var l Label
				if err := json.Unmarshal(b, &l); err != nil {
					t.Fatal(err)
				}
				k := fmt.Sprint(l.TaskID, "#", l.StepIndex)
				if !failed[k] || seen[k] || l.ErrorClass == "" {
					t.Errorf("label %+v: failed %v, seen before %v", l, failed[k], seen[k])
				}
				seen[k] = true
			})
			if len(seen) != len(failed) {
				t.Errorf("%d failed calls, %d labelled", len(failed), len(seen))
			}
		})
	}
}

func eachJSON(t *testing.T, path string, fn func([]byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			fn(line)
		}
	}
}
