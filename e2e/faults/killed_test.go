//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// TestKilledSidecarLosesNoAnsweredCall makes 75 calls through a real
// `hindsight wrap` (8 in flight, then a few one at a time), reads every
// answer and SIGKILLs the sidecar at once, or 30 ms later, as an agent
// host that kills its servers at exit does. The next sidecar drains the
// dead one's outbox: every answered call is in the daemon's traces exactly
// once, and `hindsight status` counts no loss.
func TestKilledSidecarLosesNoAnsweredCall(t *testing.T) {
	for _, after := range []time.Duration{0, 30 * time.Millisecond} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			const bursts, single = 70, 5
			home := plainHome(t)
			a := wrapFake(t, home)
			a.initialize()
			a.echoCalls("k", 0, bursts, 64, 8)
			a.echoCalls("k", bursts, single, 64, 1)
			if after > 0 {
				time.Sleep(after)
			}
			if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			a.cmd.Wait()

			// The next session's sidecar drains the dead one's outbox.
			next := wrapFake(t, home)
			next.initialize()
			c := daemon.NewClient(home.Socket())
			defer c.CloseIdle()
			var got map[string]int
			testkit.WaitFor(t, "every answered call recorded", 30*time.Second, func() bool {
				got = echoTexts(t, c)
				return len(got) >= bursts+single
			})
			for i := range bursts + single {
				if n := got[fmt.Sprintf("k-%d-", i)]; n != 1 {
					t.Errorf("call %d recorded %d times", i, n)
				}
			}
			if len(got) != bursts+single {
				t.Errorf("%d distinct calls recorded, %d answered", len(got), bursts+single)
			}
			next.CloseInput()
			next.cmd.Wait()
			if l := lossesOf(status(t, home), "fake"); l.Lost != 0 {
				t.Errorf("status counts %d lost steps: %+v", l.Lost, l)
			}
		})
	}
}

// echoTexts counts the echo steps the daemon stored by their text's
// "PREFIX-N-" head.
func echoTexts(t *testing.T, c *daemon.Client) map[string]int {
	t.Helper()
	ctx := context.Background()
	tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
	if err != nil {
		return nil
	}
	n := map[string]int{}
	for _, task := range tasks {
		full, err := c.Task(ctx, task.ID)
		if err != nil {
			return nil
		}
		for _, s := range full.Steps {
			if head, ok := echoHead(s); ok {
				n[head]++
			}
		}
	}
	return n
}

// echoHead returns the "PREFIX-N-" head of an echo step's text.
func echoHead(s hindsight.Step) (string, bool) {
	var args struct{ Text string }
	if s.Tool != "echo" || json.Unmarshal(s.Arguments, &args) != nil {
		return "", false
	}
	dashes := 0
	for i, r := range args.Text {
		if r == '-' {
			if dashes++; dashes == 2 {
				return args.Text[:i+1], true
			}
		}
	}
	return "", false
}
