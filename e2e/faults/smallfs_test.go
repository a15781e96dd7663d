//go:build linux

package faults

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestSmallFilesystemHome puts the home on an 8 MiB tmpfs, below the
// default reserves (32 MiB for an outbox, 64 MiB for the daemon), with
// HINDSIGHT_DISK_RESERVE unset: the reserves fit the filesystem, the
// daemon starts, and 300 answered calls are all stored, none lost.
func TestSmallFilesystemHome(t *testing.T) {
	const calls = 300
	if os.Getenv("HINDSIGHT_DISK_RESERVE") != "" {
		t.Skip("HINDSIGHT_DISK_RESERVE is set: this test is of the default reserves")
	}
	home := smallHome(t, 8<<20, 1<<20)
	a := wrapFake(t, home)
	a.initialize()
	a.echoCalls("small", 0, calls, 200, 8)
	a.CloseInput()
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("hindsight wrap exited with %v", err)
	}
	c := daemon.NewClient(home.Socket())
	defer c.CloseIdle()
	testkit.WaitFor(t, "every call stored", time.Minute, func() bool { return storedEchoes(t, c)["small"] == calls })
	st := status(t, home)
	if !st.Running || st.DiskLow {
		t.Errorf("status: running %v, disk low %v", st.Running, st.DiskLow)
	}
	if l := lossesOf(st, "fake"); l.Lost != 0 {
		t.Errorf("status counts %d lost: %+v", l.Lost, l)
	}
}

// TestStatusSaysWhyDaemonDoesNotStart: a daemon that cannot start (here a
// reserve set by hand above the filesystem's free space) leaves why in the
// home, and `hindsight status` shows it while no daemon runs; a daemon that
// starts removes it.
func TestStatusSaysWhyDaemonDoesNotStart(t *testing.T) {
	home := plainHome(t)
	run := func(env ...string) error {
		cmd := exec.Command(testbin.Hindsight(t), "daemon")
		cmd.Env = append(append(os.Environ(), "HINDSIGHT_HOME="+string(home)), env...)
		return cmd.Run()
	}
	if err := run("HINDSIGHT_DISK_RESERVE=1000000g"); err == nil {
		t.Fatal("the daemon started without its reserve")
	}
	st := status(t, home)
	if st.Running || st.StartError == nil || !strings.Contains(st.StartError.Error, "disk space low") {
		t.Fatalf("status after a failed start: running %v, start error %+v", st.Running, st.StartError)
	}
	if !strings.Contains(st.Hint, "failed to start") {
		t.Errorf("hint %q does not say the daemon failed to start", st.Hint)
	}
	// A daemon that starts clears it.
	c, err := daemon.EnsureRunning(context.Background(), home, testbin.Hindsight(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdle()
	testbin.StopDaemon(t, string(home))
	if _, err := os.Stat(home.Path("daemon-start-error.json")); !os.IsNotExist(err) {
		t.Errorf("start error kept after a daemon started: %v", err)
	}
}
