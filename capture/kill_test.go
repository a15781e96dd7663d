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
// a steady stream of exchanges and prints each one's number after Hook,
// as the proxy calls Hook after relaying the response.
func recordForever(home hindsight.Home) {
	r, err := New(Options{Home: home, Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sess := &proxy.Session{ID: "k", Server: "fs", Transport: "stdio"}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		now := time.Now()
		r.Hook(&proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Method: "tools/call",
			Request:  []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"t","arguments":{"i":` + strconv.Itoa(i) + `,"password":"pw-` + strconv.Itoa(i) + `"}}}`),
			Response: []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":{"content":[{"type":"text","text":"ok"}]}}`),
			Started:  now, Ended: now})
		fmt.Fprintln(w, i)
		w.Flush()
		time.Sleep(2 * time.Millisecond) // steady traffic: 500 calls/s
	}
}

// TestSIGKILLLosesNothingRelayed kills a recording process with SIGKILL
// mid-traffic: every exchange it relayed more than 50 ms before the kill
// must be found in its outbox and delivered by DrainOrphans.
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
	type seen struct {
		i  int
		at time.Time
	}
	lines := make(chan seen, 1<<16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			i, _ := strconv.Atoi(sc.Text())
			lines <- seen{i, time.Now()}
		}
		close(lines)
	}()
	var got []seen
	for len(got) < 300 {
		select {
		case s := <-lines:
			got = append(got, s)
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("child printed %d lines", len(got))
		}
	}
	killAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for s := range lines {
		got = append(got, s)
	}
	must := 0
	for _, s := range got {
		if s.at.Before(killAt.Add(-50 * time.Millisecond)) {
			must = s.i + 1
		}
	}
	d := &collector{}
	n, err := DrainOrphans(context.Background(), hindsight.Home(home), d)
	if err != nil {
		t.Fatal(err)
	}
	steps := d.got()
	t.Logf("relayed %d, %d more than 50 ms before the kill; outbox held %d", len(got), must, n)
	if len(steps) < must {
		t.Fatalf("lost steps: %d delivered, %d relayed more than 50 ms before SIGKILL", len(steps), must)
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
