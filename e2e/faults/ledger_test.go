//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/hindsight-proxy/hindsight/spool"
)

// TestKilledQueuedCallsCounted makes 75 calls through a real `hindsight
// wrap` whose capture takes the queue path for every exchange
// (HINDSIGHT_CAPTURE=queue: nothing is journaled before its answer, as
// when the daemon is behind), reads every answer and SIGKILLs the sidecar
// at once, or 30 ms later. The next sidecar drains the dead one's outbox:
// every answered exchange (the calls and initialize) is either in the
// daemon's traces, once, or counted lost (crash) in `hindsight status` —
// recorded + counted == answered — and status never says "none" when
// something was lost.
func TestKilledQueuedCallsCounted(t *testing.T) {
	for _, after := range []time.Duration{0, 30 * time.Millisecond} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			const bursts, single = 70, 5
			const answered = bursts + single + 1 // and initialize
			home := plainHome(t)
			a := wrapFake(t, home, "HINDSIGHT_CAPTURE=queue")
			a.initialize()
			a.echoCalls("q", 0, bursts, 64, 8)
			a.echoCalls("q", bursts, single, 64, 1)
			if after > 0 {
				time.Sleep(after)
			}
			if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			a.cmd.Wait()
			owed, dead := deadUnsettled(t, home)
			t.Logf("the dead sidecar's ledger owes %d unsettled exchanges", owed)

			next := wrapFake(t, home)
			next.initialize()
			c := daemon.NewClient(home.Socket())
			defer c.CloseIdle()
			recorded, counted := 0, int64(0)
			testkit.WaitFor(t, "every answered call recorded or counted", 30*time.Second, func() bool {
				got := echoTexts(t, c)
				recorded = 0
				for i := range bursts + single {
					if n := got[fmt.Sprintf("q-%d-", i)]; n > 0 {
						recorded++
						if n != 1 {
							t.Fatalf("call %d recorded %d times", i, n)
						}
					}
				}
				recorded += methodSteps(t, c, "initialize", dead)
				counted = lossesOf(status(t, home), "fake").Reasons[losses.Crash]
				return int64(recorded)+counted >= answered
			})
			if int64(recorded)+counted != answered {
				t.Errorf("%d recorded + %d counted lost, %d answered", recorded, counted, answered)
			}
			if counted != owed {
				t.Errorf("status counts %d lost, the dead sidecar's ledger owed %d", counted, owed)
			}
			t.Logf("%d answered: %d recorded, %d counted lost", answered, recorded, counted)
			checkStatusText(t, home, counted)
			next.CloseInput()
			next.cmd.Wait()
		})
	}
}

// TestKilledAfterBatch sends a JSON-RPC batch of 5 calls through a real
// `hindsight wrap` (the server answers with a batch), answers a request
// the server sends the agent (sampling/createMessage), and SIGKILLs the
// sidecar as soon as the agent has both answers through: every call of
// the batch, the server's request and initialize are recorded, or counted
// lost.
func TestKilledAfterBatch(t *testing.T) {
	const calls = 5
	home := plainHome(t)
	a := wrapFake(t, home)
	a.initialize()
	var batch, answers []string
	for i := range calls {
		text := fmt.Sprintf("b-%d-", i)
		batch = append(batch, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, 100+i, text))
		answers = append(answers, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`, 100+i, text))
	}
	a.Send("[" + strings.Join(batch, ",") + "]")
	// The fake server answers what it is told to say: the batch's answer,
	// then a request of its own to the agent.
	say := func(line string) {
		b, _ := json.Marshal([]string{line})
		a.Send(`{"jsonrpc":"2.0","method":"fake/say","params":{"lines":` + string(b) + `}}`)
	}
	answer := "[" + strings.Join(answers, ",") + "]"
	say(answer)
	if l := a.Recv(); l != answer {
		t.Fatalf("the batch answered %.300s", l)
	}
	say(`{"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`)
	if l := a.Recv(); !strings.Contains(l, `"srv-1"`) {
		t.Fatalf("the server's request arrived as %.300s", l)
	}
	a.Send(`{"jsonrpc":"2.0","id":"srv-1","result":{"role":"assistant","content":{"type":"text","text":"s-answer"},"model":"m"}}`)
	// A ping behind the answer: once it is answered, the sidecar relayed
	// the agent's answer to the server.
	a.Send(`{"jsonrpc":"2.0","id":999,"method":"ping"}`)
	if l := a.Recv(); !strings.Contains(l, `"id":999`) {
		t.Fatalf("ping answered %.300s", l)
	}
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()
	_, dead := deadUnsettled(t, home)

	next := wrapFake(t, home)
	next.initialize()
	c := daemon.NewClient(home.Socket())
	defer c.CloseIdle()
	want := calls + 2
	recorded, counted := 0, int64(0)
	testkit.WaitFor(t, "the batch and the server's request recorded or counted", 30*time.Second, func() bool {
		got := echoTexts(t, c)
		recorded = 0
		for i := range calls {
			recorded += min(got[fmt.Sprintf("b-%d-", i)], 1)
		}
		recorded += methodSteps(t, c, "sampling/createMessage", dead) + methodSteps(t, c, "initialize", dead)
		counted = lossesOf(status(t, home), "fake").Reasons[losses.Crash]
		return int64(recorded)+counted >= int64(want)
	})
	if int64(recorded)+counted != int64(want) {
		t.Errorf("%d recorded + %d counted lost, %d answered", recorded, counted, want)
	}
	t.Logf("%d answered: %d recorded, %d counted lost", want, recorded, counted)
	next.CloseInput()
	next.cmd.Wait()
}

// deadUnsettled sums what the ledgers of the outboxes under home owe
// unsettled (read before a drainer counts them), and returns their ids.
func deadUnsettled(t *testing.T, home hindsight.Home) (int64, map[string]bool) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(home.Outboxes(), "*"))
	var n int64
	ids := map[string]bool{}
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || strings.HasPrefix(filepath.Base(dir), ".") {
			continue
		}
		u, err := spool.LedgerUnsettled(dir)
		if err != nil {
			t.Fatal(err)
		}
		n += u
		ids[filepath.Base(dir)] = true
	}
	return n, ids
}

// methodSteps counts the steps of method the daemon stored from the
// outboxes sources.
func methodSteps(t *testing.T, c *daemon.Client, method string, sources map[string]bool) int {
	t.Helper()
	ctx := context.Background()
	tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
	if err != nil {
		return 0
	}
	n := 0
	for _, task := range tasks {
		full, err := c.Task(ctx, task.ID)
		if err != nil {
			return 0
		}
		for _, s := range full.Steps {
			if s.Method == method && sources[s.Source] {
				n++
			}
		}
	}
	return n
}

// checkStatusText checks that `hindsight status` names the loss when
// lost > 0, and says "none" only when nothing was lost.
func checkStatusText(t *testing.T, home hindsight.Home, lost int64) {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), "status")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	out, _ := cmd.Output()
	none := strings.Contains(string(out), "no step lost or cut")
	if lost > 0 && (none || !strings.Contains(string(out), fmt.Sprintf("%d lost", lost))) {
		t.Errorf("%d lost, but status says:\n%s", lost, out)
	}
	if lost == 0 && !none {
		t.Errorf("nothing lost, but status says:\n%s", out)
	}
}
