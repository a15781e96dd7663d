//go:build unix

package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/demo/exampleserver"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/hindsight-proxy/hindsight/reflect"
	"github.com/mark3labs/mcp-go/client"
)

// agentOn runs the agent against the example server in memory, without
// Hindsight; instructions replace the server's.
func agentOn(t *testing.T, instructions string) *Transcript {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := exampleserver.New(exampleserver.Options{RetryAfter: 20 * time.Millisecond, Instructions: instructions})
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	instr, err := Initialize(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Client: c, Instructions: instr, Month: "2026-03", Due: time.Date(2026, 4, 15, 0, 0, 0, 0, time.UTC), User: "u", Password: "p"}
	tr, err := a.Run(ctx)
	if err != nil {
		t.Fatalf("agent: %v (steps %+v)", err, tr.Steps)
	}
	return tr
}

// TestAgentRecoversFromErrors: knowing nothing, the agent hits every trap
// and recovers from each by reading the error.
func TestAgentRecoversFromErrors(t *testing.T) {
	tr := agentOn(t, "")
	if !tr.Done || tr.Failures != 3 {
		t.Fatalf("done %v, %d failures, want 3: %+v", tr.Done, tr.Failures, tr.Steps)
	}
}

// TestAgentFollowsLessons: the agent avoids exactly the traps the lessons
// it is shown cover; nothing else changes its behaviour.
func TestAgentFollowsLessons(t *testing.T) {
	lessons := []string{
		"- fetch_report: Call login before fetch_report (otherwise it failed with 401).",
		`- create_invoice: When calling create_invoice, pass due_date in the form NNNN-NN-NN (like "2026-04-15"), not NN/NN/NNNN (like "04/15/2026").`,
		"- send_invoice: When calling send_invoice, pass pause_ms (e.g. pause_ms=20) (otherwise it failed with 429).",
	}
	for n := 0; n <= len(lessons); n++ {
		instr := "Billing API.\n\n[Hindsight] Lessons learned in past runs with this server:\n" + strings.Join(lessons[:n], "\n")
		tr := agentOn(t, instr)
		if want := 3 - n; !tr.Done || tr.Failures != want {
			t.Errorf("with %d lessons: done %v, %d failures, want %d", n, tr.Done, tr.Failures, want)
		}
		if len(tr.Lessons) != n {
			t.Errorf("with %d lessons the agent used %q", n, tr.Lessons)
		}
	}
}

// TestDemo runs `hindsight demo`'s whole loop with the real binary: the
// daemon, wrap sidecars over stdio, capture, reflection and injection.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hindsight binary; skipped under -short")
	}
	exe := testbin.Hindsight(t)
	dir, err := os.MkdirTemp("", "hs-demo-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var out bytes.Buffer
	res, err := Demo(context.Background(), Options{Home: hindsight.Home(dir), Exe: exe, Out: &out})
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if pid := daemon.LockHolder(hindsight.Home(dir)); pid > 0 && syscall.Kill(pid, 0) == nil {
		t.Errorf("the daemon the demo started (pid %d) still runs", pid)
	}
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs", len(res.Runs))
	}
	r1, r2 := res.Runs[0], res.Runs[1]
	if !r1.Done || r1.Failures < 2 {
		t.Errorf("run 1: done %v with %d failures, want at least 2", r1.Done, r1.Failures)
	}
	if !r2.Done || r2.Failures != 0 {
		t.Errorf("run 2: done %v with %d failures, want none", r2.Done, r2.Failures)
	}
	if len(r2.Steps) >= len(r1.Steps) {
		t.Errorf("run 2 took %d steps, run 1 %d", len(r2.Steps), len(r1.Steps))
	}
	if len(res.Learned) < 2 || len(r2.Lessons) < 2 || r2.Instructions == "" {
		t.Errorf("learned %d, run 2 used %q, instructions %q", len(res.Learned), r2.Lessons, r2.Instructions)
	}
	if r2.TokensInjected <= r1.TokensInjected || r2.TokensInjected > 1000 {
		t.Errorf("tokens injected: run 1 %d, run 2 %d", r1.TokensInjected, r2.TokensInjected)
	}
	// The three lessons generalise: each is about one error template,
	// quotes none of run 1's own values, and the error text grounds it
	// (a precondition the 401 names, the date shape it asks for, the
	// argument it asks for), so one task puts it above the injection gate.
	for _, e := range res.Learned {
		if e.ErrorTemplate == "" || e.Origin != "rules" || e.EvidenceCount < 1 || e.Confidence < reflect.DefaultInjectConfidence {
			t.Errorf("lesson %q: template %q, origin %q, evidence %d, confidence %v", e.Lesson, e.ErrorTemplate, e.Origin, e.EvidenceCount, e.Confidence)
		}
		for _, v := range []string{"04/15/2026", "2026-04-15", "INV-0001", "Acme", "2026-03"} {
			if strings.Contains(e.Lesson+e.Situation+e.Action+e.Result, v) {
				t.Errorf("lesson quotes run 1's value %q: %s", v, e.Lesson)
			}
		}
	}
	if !strings.Contains(out.String(), "seen in 1 task") {
		t.Errorf("the demo does not show its lessons' evidence")
	}
	// Every lesson run 2 was shown helped a task that succeeded: reflection
	// on run 2 credits each with a hit, and nothing else.
	if len(res.Credited) != len(res.Learned) {
		t.Errorf("credited %d of the %d lessons run 2 was shown", len(res.Credited), len(res.Learned))
	}
	for _, e := range res.Credited {
		if e.HitCount != 1 || e.LastHitAt == nil {
			t.Errorf("experience %s: hit count %d, last hit %v; want 1 and a time", e.ID, e.HitCount, e.LastHitAt)
		}
	}
	asked := 0
	for _, s := range r2.Steps {
		if s.Tool == "query_hindsight" {
			asked++
		}
	}
	if asked != 3 {
		t.Errorf("run 2 asked Hindsight %d times, want before each of the 3 planned calls", asked)
	}
	for _, want := range []string{"failures", "tokens injected", "Hindsight learned"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestDemoCommand runs `hindsight demo --json` as a user would: no home,
// no configuration; it leaves no temporary home and no daemon behind.
func TestDemoCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hindsight binary; skipped under -short")
	}
	exe := testbin.Hindsight(t)
	cmd := exec.Command(exe, "demo", "--json")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME=/nonexistent/should-not-be-used")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hindsight demo --json: %v\n%s", err, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if len(res.Runs) != 2 || res.Runs[0].Failures < 2 || res.Runs[1].Failures != 0 || !res.Runs[1].Done {
		t.Errorf("runs %+v", res.Runs)
	}
	if res.Home == "" || strings.HasPrefix(res.Home, "/nonexistent") {
		t.Errorf("home %q", res.Home)
	}
	if _, err := os.Stat(res.Home); !os.IsNotExist(err) {
		t.Errorf("temporary home %s left behind (%v)", res.Home, err)
	}
}
