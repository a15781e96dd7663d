//go:build unix

package e2e

// End-to-end test of the store-operation queue: the real daemon binary
// over a real Weaviate that is killed while agent tasks run through a
// real `hindsight wrap` sidecar, then brought back on its data.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/demo"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// runDemoAgent runs the demo's scripted agent once through a wrap sidecar
// in front of `hindsight example-server`, as task id; onStep sees each
// step as it is made. wrap are more wrap flags (a later --name wins over
// the demo's).
func runDemoAgent(t *testing.T, exe string, home hindsight.Home, id string, onStep func(demo.Step), wrap ...string) *demo.Transcript {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append(append([]string{"wrap", "--name", demo.ServerName}, wrap...), "--", exe, "example-server")
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home), "HINDSIGHT_TASK_ID="+id)
	c, err := client.NewStdioMCPClientWithOptions(exe, nil, nil, transport.WithCommandFunc(
		func(context.Context, string, []string, []string) (*exec.Cmd, error) { return cmd, nil }))
	if err != nil {
		t.Fatal(err)
	}
	instructions, err := demo.Initialize(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	a := &demo.Agent{Client: c, Instructions: instructions, Month: "2026-03", Due: time.Date(2026, 4, 15, 0, 0, 0, 0, time.UTC),
		User: "demo", Password: "demo-password-123", OnStep: onStep}
	tr, err := a.Run(ctx)
	c.Close()
	if err != nil {
		t.Fatalf("agent run %s: %v", id, err)
	}
	return tr
}

// eventually waits (generously: it is no timing assertion) until cond
// holds, saying what it waited for.
func eventually(t *testing.T, what string, wait time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v (%s)", what, wait, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// skipWithoutWeaviate skips a daemon test over a real Weaviate under
// -short or without the weaviate-server binary.
func skipWithoutWeaviate(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the daemon over a real Weaviate; skipped under -short")
	}
	if _, err := os.Stat(weaviatetest.Binary()); err != nil {
		t.Skipf("no weaviate-server at %s: install it with GOBIN=$HOME/.cache/hindsight/bin go install github.com/weaviate/weaviate/cmd/weaviate-server@%s", weaviatetest.Binary(), weaviatetest.Version)
	}
}

// weaviateHome returns a new home whose configuration stores experiences
// in wv; the daemon started in it is stopped when the test ends (its log
// shown if the test failed). yaml is appended to the configuration, whose
// last lines are store.weaviate's url and grpc.
func weaviateHome(t *testing.T, wv *weaviatetest.Server, yaml ...string) hindsight.Home {
	t.Helper()
	cfg := fmt.Sprintf("store:\n  backend: weaviate\n  weaviate:\n    url: %s\n    grpc: %s\n", wv.URL, wv.GRPC) + strings.Join(yaml, "")
	dir := testbin.HomeWith(t, cfg)
	home := hindsight.Home(dir)
	if err := home.Ensure(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		testbin.StopDaemon(t, dir)
		if t.Failed() {
			b, _ := os.ReadFile(home.Path("logs", "daemon.log"))
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("daemon.log:\n%s", b)
		}
	})
	return home
}

// runCLI runs the hindsight command line exe in home dir and returns what
// it printed; a failure fails the test.
func runCLI(t *testing.T, exe, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hindsight %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestStoreOutageLosesNothing: Weaviate is killed while the daemon runs.
// A task through the sidecar is still recorded, query_hindsight answers
// that the experience store is unavailable and the run completes; the task's
// reflection waits (not failed); a forget is queued (202, status depth).
// Weaviate comes back on its data and ports: the task's lessons are
// reflected and its hits credited, the forget is applied and the queue
// empties.
func TestStoreOutageLosesNothing(t *testing.T) {
	skipWithoutWeaviate(t)
	exe := testbin.HindsightFull(t)
	wv := weaviatetest.Start(t)
	home := weaviateHome(t, wv)
	dir := string(home)
	ctx := context.Background()
	c, err := daemon.EnsureRunning(ctx, home, exe)
	if err != nil {
		t.Fatal(err)
	}
	lessons := func() []hindsight.Experience {
		all, _ := c.Experiences(ctx, hindsight.ListOptions{Server: demo.ServerName, IncludeDeleted: true})
		return all
	}

	// Run 1, store up: the lessons are learnt.
	runDemoAgent(t, exe, home, "so-1", nil)
	eventually(t, "lessons of run 1", 2*time.Minute, func() (bool, string) {
		return len(lessons()) >= 2, fmt.Sprintf("%d lessons", len(lessons()))
	})
	learned := lessons()

	// Run 2: Weaviate dies after the first step (the sidecar injected the
	// lessons at the start).
	killed := false
	tr := runDemoAgent(t, exe, home, "so-2", func(demo.Step) {
		if !killed {
			killed = true
			wv.Kill()
		}
	})
	if !tr.Done {
		t.Fatalf("run 2 did not finish with the store down: %+v", tr.Steps)
	}
	unavailable := 0
	for _, s := range tr.Steps[1:] {
		if s.Tool == "query_hindsight" && strings.Contains(s.Result, "experience store is unavailable") {
			unavailable++
		}
	}
	if unavailable == 0 {
		t.Fatalf("no query_hindsight answered that the experience store is unavailable: %+v", tr.Steps)
	}
	eventually(t, "run 2 recorded and waiting for reflection", 3*time.Minute, func() (bool, string) {
		task, err := c.Task(ctx, "so-2")
		st, serr := c.Status(ctx)
		if err != nil || serr != nil || st.Reflection == nil {
			return false, fmt.Sprint(err, serr)
		}
		q := st.Reflection
		return task.Final && len(task.Steps) > 0 && task.Reflection == "pending" && strings.Contains(q.LastError, "experience store"),
			fmt.Sprintf("final %v, %d steps, reflection %q, queue %+v", task.Final, len(task.Steps), task.Reflection, *q)
	})

	// A forget while the store is down is queued, as the command line
	// says, and the status shows it.
	forgotten := learned[0].ID
	cli := func(args ...string) string { return runCLI(t, exe, dir, args...) }
	if out := cli("experiences", "forget", forgotten); !strings.Contains(out, "queued: the store is unreachable; applied when it is back") {
		t.Fatalf("experiences forget with the store down printed %q", out)
	}
	if out := cli("status"); !strings.Contains(out, "store queue") || !strings.Contains(out, "1 queued") {
		t.Fatalf("status with a queued forget:\n%s", out)
	}
	_, err = c.Restore(ctx, learned[1].Namespace, learned[1].ID) // already active: queued behind the forget all the same
	var q *daemon.QueuedError
	if !errors.As(err, &q) {
		t.Fatalf("restore with a write waiting: %v, want it queued", err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.StoreOps == nil || st.StoreOps.Depth != 2 || st.StoreOps.Oldest == nil {
		t.Fatalf("status with a queued forget: %+v, %v", st.StoreOps, err)
	}
	if st.Reflection.Failed != 0 {
		t.Fatalf("reflection marked tasks failed during the outage: %+v", *st.Reflection)
	}

	// Weaviate comes back on the same data and ports.
	wv.Start(t)
	eventually(t, "everything applied after the store came back", 5*time.Minute, func() (bool, string) {
		st, err := c.Status(ctx)
		task, terr := c.Task(ctx, "so-2")
		if err != nil || terr != nil || st.StoreOps == nil {
			return false, fmt.Sprint(err, terr)
		}
		deleted, hits := false, 0
		for _, e := range lessons() {
			if e.ID == forgotten {
				deleted = e.Deleted
			} else {
				hits += e.HitCount
			}
		}
		return st.StoreOps.Depth == 0 && task.Reflection == "done" && deleted && hits > 0,
			fmt.Sprintf("queue %+v, reflection %q, forget applied %v, hits %d", *st.StoreOps, task.Reflection, deleted, hits)
	})
	if st, err := c.Status(ctx); err != nil || st.Reflection.Failed != 0 {
		t.Fatalf("after the outage: %+v, %v", st.Reflection, err)
	}
}
