//go:build unix

package capture

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/proxy"
)

const (
	childEnv = "HINDSIGHT_CAPTURE_KILL_CHILD"
	// childAckEnv gives the child a daemon that acknowledges batches
	// after a random delay of up to 150 ms (some sooner than the outbox
	// writes them to disk, some later).
	childAckEnv = "HINDSIGHT_CAPTURE_KILL_CHILD_ACK"
)

func TestMain(m *testing.M) {
	if home := os.Getenv(childEnv); home != "" {
		recordForever(hindsight.Home(home), os.Getenv(childAckEnv) != "")
		return
	}
	os.Exit(m.Run())
}

// slowDaemon acknowledges each batch after a random delay, printing
// "a SEQ" for every step of it before it returns.
type slowDaemon struct{ say func(string, int64) }

func (d slowDaemon) Deliver(ctx context.Context, steps []hindsight.Step) error {
	select {
	case <-time.After(time.Duration(rand.IntN(150)) * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, s := range steps {
		d.say("a", int64(s.Seq))
	}
	return nil
}

// recordForever is the child of the SIGKILL tests: it records a steady
// stream of exchanges and prints "h N" after each Hook (the proxy calls
// Hook after relaying the response), and every few milliseconds "c N":
// how many exchanges are committed to the outbox (on disk when there is
// no daemon). With ack set, a slowDaemon receives the steps.
func recordForever(home hindsight.Home, ack bool) {
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	say := func(kind string, n int64) {
		mu.Lock()
		fmt.Fprintln(w, kind, n)
		w.Flush()
		mu.Unlock()
	}
	opts := Options{Home: home, Logger: slog.New(slog.DiscardHandler)}
	if ack {
		opts.Deliverer = slowDaemon{say: say}
	}
	r, err := New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go func() {
		for {
			say("c", r.processed.Load())
			time.Sleep(2 * time.Millisecond)
		}
	}()
	sess := &proxy.Session{ID: "k", Server: "fs", Transport: "stdio"}
	for i := 0; ; i++ {
		now := time.Now()
		r.Hook(&proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Method: "tools/call",
			Request:  []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"t","arguments":{"i":` + strconv.Itoa(i) + `,"password":"pw-` + strconv.Itoa(i) + `"}}}`),
			Response: []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":{"content":[{"type":"text","text":"ok"}]}}`),
			Started:  now, Ended: now})
		say("h", int64(i))
		time.Sleep(2 * time.Millisecond) // steady traffic: up to 500 calls/s
	}
}

// TestSIGKILLLosesNothingRelayed kills a recording process with SIGKILL
// mid-traffic. Every exchange it reported committed before the kill must
// be in its outbox and delivered by DrainOrphans, in order and redacted;
// and so must every exchange it relayed more than 50 ms before the kill
// (checked without the race detector, which slows redaction several
// times; under it the figure is only logged).
func TestSIGKILLLosesNothingRelayed(t *testing.T) {
	got, killAt, home := runAndKill(t, "")
	var relayedBefore, committed int64
	for _, l := range got {
		switch {
		case l.kind == "h" && l.at.Before(killAt.Add(-50*time.Millisecond)):
			relayedBefore = l.n + 1
		case l.kind == "c" && l.at.Before(killAt):
			committed = l.n
		}
	}
	d := &spooltest.Collector{}
	n, err := DrainOrphans(context.Background(), hindsight.Home(home), d, 0)
	if err != nil {
		t.Fatal(err)
	}
	steps := d.Got()
	t.Logf("%d relayed more than 50 ms before the kill; %d reported committed; outbox held %d", relayedBefore, committed, n)
	if int64(len(steps)) < committed {
		t.Fatalf("lost committed steps: %d delivered, %d committed before SIGKILL", len(steps), committed)
	}
	if int64(len(steps)) < relayedBefore {
		if !raceEnabled {
			t.Fatalf("lost steps: %d delivered, %d relayed more than 50 ms before SIGKILL", len(steps), relayedBefore)
		}
		t.Logf("under the race detector capture fell %d steps behind", relayedBefore-int64(len(steps)))
	}
	for i, s := range steps {
		if s.Seq != uint64(i+1) {
			t.Fatalf("gap: seq %d at %d", s.Seq, i)
		}
		if want := `"i":` + strconv.Itoa(i); !contains(s.Arguments, want) {
			t.Fatalf("step %d holds %s", i, s.Arguments)
		}
		if contains(s.Request, "pw-") {
			t.Fatalf("unredacted password in %s", s.Request)
		}
	}
}

// TestSIGKILLMemoryFirst kills a recording process whose daemon
// acknowledges batches after up to 150 ms, so that steps are delivered
// from memory and written to disk only when not acknowledged in time:
// every step relayed more than 50 ms before the kill was acknowledged or
// is in the outbox, whose steps are in order and redacted.
func TestSIGKILLMemoryFirst(t *testing.T) {
	got, killAt, home := runAndKill(t, "1")
	var relayedBefore int64
	acked := map[uint64]bool{}
	for _, l := range got {
		switch {
		case l.kind == "h" && l.at.Before(killAt.Add(-50*time.Millisecond)):
			relayedBefore = l.n + 1
		case l.kind == "a":
			acked[uint64(l.n)] = true
		}
	}
	d := &spooltest.Collector{}
	n, err := DrainOrphans(context.Background(), hindsight.Home(home), d, 0)
	if err != nil {
		t.Fatal(err)
	}
	steps := d.Got()
	t.Logf("%d relayed more than 50 ms before the kill; %d acknowledged; outbox held %d", relayedBefore, len(acked), n)
	have := maps.Clone(acked)
	for i, s := range steps {
		if i > 0 && s.Seq <= steps[i-1].Seq {
			t.Fatalf("outbox out of order: seq %d after %d", s.Seq, steps[i-1].Seq)
		}
		if want := `"i":` + strconv.Itoa(int(s.Seq)-1); !contains(s.Arguments, want) {
			t.Fatalf("step %d holds %s", s.Seq, s.Arguments)
		}
		if contains(s.Request, "pw-") {
			t.Fatalf("unredacted password in %s", s.Request)
		}
		have[s.Seq] = true
	}
	if len(steps) == 0 {
		t.Error("nothing was written to disk: the test did not exercise the fallback")
	}
	var missing int
	for seq := uint64(1); seq <= uint64(relayedBefore); seq++ {
		if !have[seq] {
			missing++
		}
	}
	if missing > 0 {
		if !raceEnabled {
			t.Fatalf("lost %d of the %d steps relayed more than 50 ms before SIGKILL", missing, relayedBefore)
		}
		t.Logf("under the race detector %d steps were neither acknowledged nor on disk", missing)
	}
}

type childLine struct {
	kind string
	n    int64
	at   time.Time
}

// runAndKill starts recordForever in a child process, lets it hook 300
// exchanges, kills it with SIGKILL, and returns what it printed, when it
// was killed and its home.
func runAndKill(t *testing.T, ack string) ([]childLine, time.Time, string) {
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+home, childAckEnv+"="+ack)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan childLine, 1<<16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			kind, num, _ := strings.Cut(sc.Text(), " ")
			n, _ := strconv.ParseInt(num, 10, 64)
			lines <- childLine{kind, n, time.Now()}
		}
		close(lines)
	}()
	var got []childLine
	hooked := 0
	for hooked < 300 {
		select {
		case l := <-lines:
			got = append(got, l)
			if l.kind == "h" {
				hooked++
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("child hooked %d exchanges", hooked)
		}
	}
	killAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for l := range lines {
		got = append(got, l)
	}
	return got, killAt, home
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
