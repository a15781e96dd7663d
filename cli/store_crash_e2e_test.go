//go:build unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// marker is a word found in lesson i alone (letters only, so that it
// is one term).
func marker(i int) string {
	b := []byte("quokka")
	for range 3 {
		b = append(b, byte('a'+i%26))
		i /= 26
	}
	return string(b)
}

// writeCrashPack writes lessons from to to (exclusive) as a pack.
func writeCrashPack(t *testing.T, dir string, from, to int) string {
	t.Helper()
	var b bytes.Buffer
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := from; i < to; i++ {
		e := hindsight.Experience{ID: fmt.Sprintf("crash-%04d", i), Server: "fs", Tool: fmt.Sprintf("tool_%d", i%7),
			Situation: "reading a file that the " + marker(i) + " job wrote", Action: "called read_file",
			Lesson: "Wait for the " + marker(i) + " job before read_file.", Confidence: 0.9, CreatedAt: day, UpdatedAt: day}
		line, _ := json.Marshal(e)
		b.Write(append(line, '\n'))
	}
	path := filepath.Join(dir, fmt.Sprintf("pack-%d.jsonl", from))
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// killable is a `hindsight daemon` the test kills.
type killable struct {
	cmd  *exec.Cmd
	done chan error
	c    *daemon.Client
}

func startKillable(t *testing.T, home hindsight.Home) *killable {
	t.Helper()
	k := &killable{cmd: exec.Command(testbin.Hindsight(t), "daemon"), done: make(chan error, 1)}
	k.cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	var stderr bytes.Buffer
	k.cmd.Stderr = &stderr
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { k.done <- k.cmd.Wait() }()
	t.Cleanup(func() { k.cmd.Process.Kill(); <-k.done; k.done <- nil })
	k.c = daemon.NewClient(home.Socket())
	testkit.WaitFor(t, "the daemon to answer", 30*time.Second, func() bool {
		select {
		case err := <-k.done:
			k.done <- err
			t.Fatalf("daemon exited: %v\n%s", err, stderr.String())
		default:
		}
		_, err := k.c.Health(context.Background())
		return err == nil
	})
	return k
}

// kill SIGKILLs the daemon and waits for it to be gone.
func (k *killable) kill(t *testing.T) {
	t.Helper()
	if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-k.done
	k.done <- err
}

// TestDaemonKilledAfterWrites kills the daemon (SIGKILL) right after an
// import and counted searches, and again right after a second import:
// each time the restarted daemon holds every lesson, finds each by its
// own word, keeps the hits counted before the kill, and started from its
// index snapshot with the writes since replayed (its log says so), not
// from a rebuild.
func TestDaemonKilledAfterWrites(t *testing.T) {
	ctx := context.Background()
	home := hindsight.Home(testbin.Home(t))
	dir := t.TempDir()
	d := startKillable(t, home)
	testbin.Run(t, string(home), false, "experiences", "import", writeCrashPack(t, dir, 0, 80))
	for i := range 20 {
		if _, err := d.c.Search(ctx, hindsight.Query{Text: marker(i), K: 2}); err != nil {
			t.Fatal(err)
		}
	}
	// Counted hits wait in the daemon's memory and are written every few
	// seconds (those a kill catches waiting are counted lost): the kill
	// comes once they were written.
	testkit.WaitFor(t, "the counted hits to be written", 30*time.Second, func() bool {
		return hitsFlushed(t, home) >= 20
	})
	d.kill(t)

	check := func(d *killable, n int) {
		t.Helper()
		list, err := d.c.Experiences(ctx, hindsight.ListOptions{})
		if err != nil || len(list) != n {
			t.Fatalf("%d experiences after the kill, want %d (%v)", len(list), n, err)
		}
		for i := range n {
			found, err := d.c.Search(ctx, hindsight.Query{Text: marker(i), K: 3, NoHit: true})
			if err != nil || len(found) == 0 || found[0].ID != fmt.Sprintf("crash-%04d", i) {
				t.Fatalf("search for lesson %d after the kill: %+v, %v", i, found, err)
			}
			if i < 20 && found[0].HitCount < 1 {
				t.Fatalf("lesson %d lost its hit: %+v", i, found[0].Experience)
			}
		}
	}
	d = startKillable(t, home)
	check(d, 80)
	testbin.Run(t, string(home), false, "experiences", "import", writeCrashPack(t, dir, 80, 100))
	d.kill(t)
	d = startKillable(t, home)
	check(d, 100)

	log, err := os.ReadFile(home.Path("logs", "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	replays := 0
	for line := range strings.SplitSeq(string(log), "\n") {
		if strings.Contains(line, "experience index loaded from its snapshot") && !strings.Contains(line, `"replayed":0`) {
			replays++
		}
		if strings.Contains(line, "experience index rebuilt") && !strings.Contains(line, `"experiences":0`) {
			t.Fatalf("a restart rebuilt the index: %s", line)
		}
	}
	if replays != 2 {
		t.Fatalf("%d starts replayed writes over the snapshot, want 2:\n%s", replays, log)
	}
}

// hitsFlushed reads hindsight_daemon_hits_flushed_total from the daemon's
// metrics, over its socket.
func hitsFlushed(t *testing.T, home hindsight.Home) float64 {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", home.Socket())
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://hindsight/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "hindsight_daemon_hits_flushed_total "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n
		}
	}
	return 0
}
