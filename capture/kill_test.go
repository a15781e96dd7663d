//go:build unix

package capture

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
)

const childEnv = "HINDSIGHT_CAPTURE_KILL_CHILD"

func TestMain(m *testing.M) {
	if home := os.Getenv(childEnv); home != "" {
		recordForever(hindsight.Home(home))
		return
	}
	os.Exit(m.Run())
}

// recordForever is the child of TestSIGKILLLosesNothingRelayed: it records
// a steady stream of exchanges and prints "h N" after each Hook (the
// proxy calls Hook after relaying the response), and every few
// milliseconds "c N": how many exchanges are committed to the outbox.
func recordForever(home hindsight.Home) {
	r, err := New(Options{Home: home, Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	say := func(kind string, n int64) {
		mu.Lock()
		fmt.Fprintln(w, kind, n)
		w.Flush()
		mu.Unlock()
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
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+home)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type line struct {
		kind string
		n    int64
		at   time.Time
	}
	lines := make(chan line, 1<<16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			kind, num, _ := strings.Cut(sc.Text(), " ")
			n, _ := strconv.ParseInt(num, 10, 64)
			lines <- line{kind, n, time.Now()}
		}
		close(lines)
	}()
	var got []line
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
	var relayedBefore, committed int64
	for _, l := range got {
		switch {
		case l.kind == "h" && l.at.Before(killAt.Add(-50*time.Millisecond)):
			relayedBefore = l.n + 1
		case l.kind == "c" && l.at.Before(killAt):
			committed = l.n
		}
	}
	d := &collector{}
	n, err := DrainOrphans(context.Background(), hindsight.Home(home), d)
	if err != nil {
		t.Fatal(err)
	}
	steps := d.got()
	t.Logf("hooked %d; %d relayed more than 50 ms before the kill; %d reported committed; outbox held %d", hooked, relayedBefore, committed, n)
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

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
