package corpus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// dir is the committed corpus, at the repository root.
var dir = filepath.Join("..", "..", "testdata", "corpus")

// TestCorpus checks that the committed corpus is the generator's output
// (go test ./lab/corpus -run TestCorpus -update rewrites it) and that
// it has the properties evaluations rely on.
func TestCorpus(t *testing.T) {
	steps, labels := Generate()
	traces, labelLines := Encode(steps, labels)
	if s2, l2 := Generate(); !reflect.DeepEqual(s2, steps) || !reflect.DeepEqual(l2, labels) {
		t.Fatal("Generate is not deterministic")
	}
	if testkit.Update() {
		if err := Write(dir, steps, labels); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string][]byte{TracesFile: traces, LabelsFile: labelLines} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output; run go test ./lab/corpus -run TestCorpus -update", name)
		}
	}
	if len(traces) > 2<<20 {
		t.Errorf("traces.jsonl is %d bytes, want at most 2 MiB", len(traces))
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Error(err)
	}

	// Every line decodes back into the step it was made from.
	lines := bytes.Split(bytes.TrimSuffix(traces, []byte("\n")), []byte("\n"))
	if len(lines) != len(steps) {
		t.Fatalf("%d lines for %d steps", len(lines), len(steps))
	}
	for i, line := range lines {
		var s hindsight.Step
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if !reflect.DeepEqual(s, steps[i]) {
			t.Fatalf("line %d decodes to\n%+v\nwant\n%+v", i+1, s, steps[i])
		}
	}
	if ls, ll, err := Load(dir); err != nil || !reflect.DeepEqual(ls, steps) || !reflect.DeepEqual(ll, labels) {
		t.Errorf("Load: err %v, or the loaded corpus differs from the generated one", err)
	}

	tasks := checkShape(t, steps)
	checkTags(t, steps)
	checkLabels(t, steps, labels, tasks)
	checkIDs(t, steps)
	checkConfounders(t, steps, labels, tasks)
	checkSchemas(t, steps)
	if m := regexp.MustCompile(`(?i)\b(flights?|airlines?|reservations?|booking)\b`).Find(traces); m != nil {
		t.Errorf("the corpus mentions %q: the airline domain must not be imitated", m)
	}
}

// checkShape checks the grouping, ordering and numbering of steps, and
// returns the task ids in order.
func checkShape(t *testing.T, steps []hindsight.Step) []string {
	t.Helper()
	var tasks []string
	servers := map[string]bool{}
	var seq uint64
	for i, s := range steps {
		seq++
		if s.Source != Source || s.Seq != seq {
			t.Errorf("step %d: source %q seq %d, want %q %d", i, s.Source, s.Seq, Source, seq)
		}
		if i == 0 || s.TaskID != steps[i-1].TaskID {
			if slices.Contains(tasks, s.TaskID) {
				t.Errorf("task %s is not contiguous", s.TaskID)
			}
			tasks = append(tasks, s.TaskID)
			if s.StepIndex != 0 {
				t.Errorf("task %s starts at step_index %d", s.TaskID, s.StepIndex)
			}
		} else if s.StepIndex != steps[i-1].StepIndex+1 || s.StartedAt.Before(steps[i-1].EndedAt) {
			t.Errorf("task %s step %d: not in order after step %d", s.TaskID, s.StepIndex, steps[i-1].StepIndex)
		}
		if s.Direction != hindsight.ClientToServer || s.SessionID == "" || s.ClientName == "" {
			t.Errorf("task %s step %d: direction %q session %q client %q", s.TaskID, s.StepIndex, s.Direction, s.SessionID, s.ClientName)
		}
		if got := float64(s.EndedAt.Sub(s.StartedAt).Microseconds()) / 1000; got != s.LatencyMS {
			t.Errorf("task %s step %d: latency %v, timestamps say %v", s.TaskID, s.StepIndex, s.LatencyMS, got)
		}
		servers[s.Server] = true
	}
	for i := 1; i < len(tasks); i++ {
		if !firstStart(steps, tasks[i]).After(firstStart(steps, tasks[i-1])) {
			t.Errorf("task %s does not start after %s", tasks[i], tasks[i-1])
		}
	}
	if len(tasks) < 48 {
		t.Errorf("%d tasks, want at least 48", len(tasks))
	}
	if len(servers) < 3 {
		t.Errorf("%d servers, want at least 3", len(servers))
	}
	for _, id := range tasks {
		ts := taskSteps(steps, id)
		listed := map[string]bool{}
		calls := 0
		for _, s := range ts {
			switch s.Method {
			case "tools/list":
				if calls > 0 || listed[s.Server] {
					t.Errorf("task %s: tools/list of %s at step %d", id, s.Server, s.StepIndex)
				}
				listed[s.Server] = true
			case "tools/call":
				calls++
				if !listed[s.Server] {
					t.Errorf("task %s: %s called before its tools/list", id, s.Server)
				}
			default:
				t.Errorf("task %s: method %s", id, s.Method)
			}
		}
		if calls < minCalls || calls > maxCalls {
			t.Errorf("task %s: %d tools/call steps, want %d to %d", id, calls, minCalls, maxCalls)
		}
	}
	return tasks
}

func firstStart(steps []hindsight.Step, task string) time.Time {
	return taskSteps(steps, task)[0].StartedAt
}

func taskSteps(steps []hindsight.Step, task string) []hindsight.Step {
	var out []hindsight.Step
	for _, s := range steps {
		if s.TaskID == task {
			out = append(out, s)
		}
	}
	return out
}

// checkTags checks the causal tags against the capture's rules, per
// session: a failure repeating the previous call identically is a retry;
// a success after a failure of its tool with no success in between is a
// recovery; a success repeating the previous call identically is a retry.
func checkTags(t *testing.T, steps []hindsight.Step) {
	t.Helper()
	type prev struct{ tool, args string }
	last := map[string]prev{}
	failing := map[string]bool{}
	for _, s := range steps {
		if s.Method != "tools/call" {
			if s.CausalTag != hindsight.TagSuccess {
				t.Errorf("task %s step %d: %s tagged %s", s.TaskID, s.StepIndex, s.Method, s.CausalTag)
			}
			continue
		}
		key := s.SessionID + " " + s.Tool
		same := last[s.SessionID] == prev{s.Tool, string(s.Arguments)}
		last[s.SessionID] = prev{s.Tool, string(s.Arguments)}
		var want hindsight.CausalTag
		switch failed := s.IsError || s.Error != nil; {
		case failed && same:
			want = hindsight.TagRetry
		case failed && s.ErrorCode == "timeout":
			want = hindsight.TagTimeout
		case failed:
			want = hindsight.TagFailure
		case failing[key]:
			want = hindsight.TagRecovery
		case same:
			want = hindsight.TagRetry
		default:
			want = hindsight.TagSuccess
		}
		failing[key] = s.IsError || s.Error != nil
		if s.CausalTag != want {
			t.Errorf("task %s step %d (%s): tag %s, want %s", s.TaskID, s.StepIndex, s.Tool, s.CausalTag, want)
		}
		if s.ErrorCode != "" && !s.Failed() {
			t.Errorf("task %s step %d: error_code %q on a successful step", s.TaskID, s.StepIndex, s.ErrorCode)
		}
	}
}

// checkLabels checks that labels and failed tools/call steps match one to
// one, that recoveries point at successes of the same tool, and that each
// recovery kind and error class occurs in at least 4 tasks and in both
// halves of the corpus.
func checkLabels(t *testing.T, steps []hindsight.Step, labels []Label, tasks []string) {
	t.Helper()
	byKey := map[string]hindsight.Step{}
	for _, s := range steps {
		byKey[fmt.Sprint(s.TaskID, "/", s.StepIndex)] = s
	}
	labelled := map[string]bool{}
	half := map[string]int{}
	for i, id := range tasks {
		half[id] = 2 * i / len(tasks)
	}
	kindTasks := map[string][2]map[string]bool{}
	classTasks := map[string][2]map[string]bool{}
	note := func(m map[string][2]map[string]bool, k, task string) {
		if _, ok := m[k]; !ok {
			m[k] = [2]map[string]bool{{}, {}}
		}
		m[k][half[task]][task] = true
	}
	for _, l := range labels {
		k := fmt.Sprint(l.TaskID, "/", l.StepIndex)
		s, ok := byKey[k]
		switch {
		case !ok:
			t.Errorf("label %s: no such step", k)
			continue
		case labelled[k]:
			t.Errorf("label %s: twice", k)
		case s.Method != "tools/call" || !s.Failed() || s.Server != l.Server || s.Tool != l.Tool:
			t.Errorf("label %s: points at %s %s on %s, failed %v", k, s.Method, s.Tool, s.Server, s.Failed())
		}
		labelled[k] = true
		if !slices.Contains([]string{RecoveryFormat, RecoveryAddedArg, RecoveryPriorCall, RecoveryOtherID, RecoveryRetry, RecoveryNone}, l.Recovery) {
			t.Errorf("label %s: recovery %q", k, l.Recovery)
		}
		if (l.Recovery == RecoveryNone) != (l.RecoveredAt == -1) {
			t.Errorf("label %s: recovery %s, recovered_at %d", k, l.Recovery, l.RecoveredAt)
		}
		if l.RecoveredAt >= 0 {
			r := byKey[fmt.Sprint(l.TaskID, "/", l.RecoveredAt)]
			if r.Tool != l.Tool || r.Failed() || r.CausalTag != hindsight.TagRecovery || l.RecoveredAt <= l.StepIndex {
				t.Errorf("label %s: recovered_at %d is %s tagged %s", k, l.RecoveredAt, r.Tool, r.CausalTag)
			}
		}
		note(kindTasks, l.Recovery, l.TaskID)
		note(classTasks, l.ErrorClass, l.TaskID)
	}
	for _, s := range steps {
		if k := fmt.Sprint(s.TaskID, "/", s.StepIndex); s.Failed() && !labelled[k] {
			t.Errorf("failed step %s has no label", k)
		}
	}
	for _, m := range []map[string][2]map[string]bool{kindTasks, classTasks} {
		for k, h := range m {
			if len(h[0])+len(h[1]) < 4 || len(h[0]) == 0 || len(h[1]) == 0 {
				t.Errorf("%s occurs in %d+%d tasks (first, second half), want at least 4 and some in each", k, len(h[0]), len(h[1]))
			}
		}
	}
	if len(kindTasks) != 6 {
		t.Errorf("%d recovery kinds, want 6", len(kindTasks))
	}
}

// idRe matches the values that belong to one task: customer, order, SKU,
// refund, return and event ids, e-mail addresses, branch names, file
// paths and repositories.
var idRe = regexp.MustCompile(`\b(?:C-\d{4,}|ORD-\d{5}|SKU-\d{6}|RF-\d{7}|RMA-\d{6}|evt_[0-9a-f]{12})\b|[a-z0-9.]+@[a-z.]+\.[a-z]+|\b(?:feature|fix|chore)/[a-z0-9-]+|/srv/[^'"\s\\]+|\b[a-z]+(?:/[a-z]+)+/[a-z]+\.go\b|\b(?:northwind|bluefinch|tallgrass|copperleaf|quietharbor|ironbark|saltmarsh|redkite)/[a-z-]+`)

// checkIDs checks that no task's ids appear in another task.
func checkIDs(t *testing.T, steps []hindsight.Step) {
	t.Helper()
	owner := map[string]string{}
	n := 0
	for _, s := range steps {
		if s.Method != "tools/call" {
			continue
		}
		text := string(s.Arguments) + string(s.Result)
		if s.Error != nil {
			text += s.Error.Message
		}
		for _, id := range idRe.FindAllString(text, -1) {
			if o, ok := owner[id]; ok && o != s.TaskID {
				t.Errorf("%s appears in tasks %s and %s", id, o, s.TaskID)
			}
			if _, ok := owner[id]; !ok {
				n++
			}
			owner[id] = s.TaskID
		}
	}
	if n < 300 {
		t.Errorf("only %d distinct ids found; is idRe still right?", n)
	}
}

// checkConfounders checks that the traps for a naive learner are there:
// think right before recoveries, two error classes on one tool, one error
// shape on several tools, tasks without failure, and a recovery changing
// several arguments at once.
func checkConfounders(t *testing.T, steps []hindsight.Step, labels []Label, tasks []string) {
	t.Helper()
	byKey := map[string]hindsight.Step{}
	for _, s := range steps {
		byKey[fmt.Sprint(s.TaskID, "/", s.StepIndex)] = s
	}
	thinkFirst := map[string]bool{}
	classesOf := map[string]map[string]bool{}
	multi := 0
	failedTasks := map[string]bool{}
	for _, l := range labels {
		failedTasks[l.TaskID] = true
		if classesOf[l.Tool] == nil {
			classesOf[l.Tool] = map[string]bool{}
		}
		classesOf[l.Tool][l.ErrorClass] = true
		if l.RecoveredAt < 0 {
			continue
		}
		if byKey[fmt.Sprint(l.TaskID, "/", l.RecoveredAt-1)].Tool == "think" {
			thinkFirst[l.TaskID] = true
		}
		var a, b map[string]any
		json.Unmarshal(byKey[fmt.Sprint(l.TaskID, "/", l.StepIndex)].Arguments, &a)
		json.Unmarshal(byKey[fmt.Sprint(l.TaskID, "/", l.RecoveredAt)].Arguments, &b)
		diff := 0
		for k := range b {
			if !reflect.DeepEqual(a[k], b[k]) {
				diff++
			}
		}
		for k := range a {
			if _, ok := b[k]; !ok {
				diff++
			}
		}
		if diff >= 3 {
			multi++
		}
	}
	if len(thinkFirst) < 4 {
		t.Errorf("think comes right before a recovery in %d tasks, want at least 4", len(thinkFirst))
	}
	both := map[string]map[string]bool{}
	for _, l := range labels {
		if l.Tool == "refund_payment" {
			if both[l.TaskID] == nil {
				both[l.TaskID] = map[string]bool{}
			}
			both[l.TaskID][l.ErrorClass] = true
		}
	}
	halves := map[int]bool{}
	for i, id := range tasks {
		if len(both[id]) >= 2 {
			halves[2*i/len(tasks)] = true
		}
	}
	if len(halves) < 2 {
		t.Errorf("refund_payment fails with two error classes in one task in %d halves, want both", len(halves))
	}
	if len(classesOf["refund_payment"]) < 2 {
		t.Errorf("refund_payment fails with %d error classes, want 2", len(classesOf["refund_payment"]))
	}
	shape := map[string]bool{}
	for _, s := range steps {
		if s.IsError && strings.Contains(string(s.Result), "missing required argument") {
			shape[s.Tool] = true
		}
	}
	if len(shape) < 2 {
		t.Errorf("missing required argument on %d tools, want at least 2", len(shape))
	}
	if clean := len(tasks) - len(failedTasks); clean < 4 {
		t.Errorf("%d tasks without failure, want at least 4", clean)
	}
	if multi < 2 {
		t.Errorf("%d recoveries change 3 or more arguments, want at least 2", multi)
	}
}

// checkSchemas checks every successful call against its server's tools/list:
// the tool is listed, its arguments are declared, required ones present,
// enum values valid.
func checkSchemas(t *testing.T, steps []hindsight.Step) {
	t.Helper()
	type schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
			Enum []any  `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	tools := map[string]map[string]schema{}
	for _, s := range steps {
		if s.Method == "tools/list" && tools[s.Server] == nil {
			var r struct {
				Tools []struct {
					Name        string `json:"name"`
					Description string `json:"description"`
					InputSchema schema `json:"inputSchema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(s.Result, &r); err != nil {
				t.Fatalf("%s tools/list: %v", s.Server, err)
			}
			tools[s.Server] = map[string]schema{}
			for _, tl := range r.Tools {
				if tl.Description == "" {
					t.Errorf("%s.%s has no description", s.Server, tl.Name)
				}
				tools[s.Server][tl.Name] = tl.InputSchema
			}
		}
	}
	for _, s := range steps {
		if s.Method != "tools/call" {
			continue
		}
		sc, ok := tools[s.Server][s.Tool]
		if !ok {
			t.Errorf("task %s step %d: %s is not a tool of %s", s.TaskID, s.StepIndex, s.Tool, s.Server)
			continue
		}
		var args map[string]any
		if err := json.Unmarshal(s.Arguments, &args); err != nil {
			t.Errorf("task %s step %d: arguments: %v", s.TaskID, s.StepIndex, err)
		}
		for k, v := range args {
			p, ok := sc.Properties[k]
			if !ok {
				t.Errorf("task %s step %d: %s has no argument %s", s.TaskID, s.StepIndex, s.Tool, k)
			}
			if len(p.Enum) > 0 && !s.Failed() && !slices.Contains(p.Enum, v) {
				t.Errorf("task %s step %d: %s=%v not in %v", s.TaskID, s.StepIndex, k, v, p.Enum)
			}
		}
		for _, k := range sc.Required {
			if _, ok := args[k]; !ok && !s.Failed() {
				t.Errorf("task %s step %d: %s lacks required %s", s.TaskID, s.StepIndex, s.Tool, k)
			}
		}
		var res struct {
			Content []struct{ Type, Text string } `json:"content"`
		}
		if s.Result != nil {
			if err := json.Unmarshal(s.Result, &res); err != nil || res.Content == nil {
				t.Errorf("task %s step %d: result %s is no CallToolResult", s.TaskID, s.StepIndex, s.Result)
			}
		}
	}
}
