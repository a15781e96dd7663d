//go:build linux

package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// StopDaemons stops every `hindsight daemon` process whose HINDSIGHT_HOME
// is home: the daemon a benchmarked sidecar started, detached, for its
// private home. Call it after the sidecars have exited. It sends SIGTERM,
// and SIGKILL to those still running after grace. Processes are matched by
// their command line and environment, so only daemons of this exact home
// (a fresh temporary directory) are touched. It works on Linux only; home
// must be absolute.
func StopDaemons(home string, grace time.Duration) error {
	pids, err := daemonsOf(home)
	if err != nil || len(pids) == 0 {
		return err
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !anyAlive(pids) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return fmt.Errorf("stop daemon of %s: pids %v ignored SIGTERM for %v; killed", home, pids, grace)
}

// daemonsOf lists the processes running `… daemon` with HINDSIGHT_HOME=home.
func daemonsOf(home string) ([]int, error) {
	if !filepath.IsAbs(home) {
		return nil, errors.New("stop daemon: home must be absolute")
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("stop daemon: %w", err)
	}
	want := []byte("HINDSIGHT_HOME=" + home)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.HasSuffix(cmdline, []byte("\x00daemon\x00")) {
			continue
		}
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)) // only our own processes are readable
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(environ, []byte{0}) {
			if bytes.Equal(kv, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

func anyAlive(pids []int) bool {
	for _, pid := range pids {
		// A zombie still answers signal 0; its state says it is gone.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
			continue
		}
		return true
	}
	return false
}

// daemonCPU returns the CPU time used so far by the daemons of home, or -1
// when there is none.
func daemonCPU(home string) (time.Duration, error) {
	pids, err := daemonsOf(home)
	if err != nil || len(pids) == 0 {
		return -1, err
	}
	var total time.Duration
	for _, pid := range pids {
		d, err := cpuTime(pid)
		if err != nil {
			return -1, err
		}
		total += d
	}
	return total, nil
}
