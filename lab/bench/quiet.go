//go:build linux

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Before each measurement Run waits for the machine to be quiet, so that
// work left over from the previous measurement is not charged to the next
// variant: a capturing sidecar working off what it queued at 64 calls in
// flight, its outbox delivering a quarter of a second after the last call,
// its daemon ingesting. Without the wait that work landed on whichever
// variant came next, the relay without capture as often as not.
const (
	// quietWindow is longer than a sidecar's delivery linger (250 ms), so
	// a delivery still pending shows within it.
	quietWindow = 300 * time.Millisecond
	// quietShare is the share of the machine's CPU time that may be busy
	// over quietWindow for it to count as quiet.
	quietShare = 0.05
	// DefaultSettle bounds the wait: a machine loaded by other work is
	// measured anyway (and the report says how often that happened).
	DefaultSettle = 5 * time.Second
)

// cpuTimes are the busy and total clock ticks of all CPUs since boot.
type cpuTimes struct{ busy, total uint64 }

// parseProcStat reads the aggregate "cpu" line of /proc/stat: busy is
// everything but idle and iowait.
func parseProcStat(b []byte) (cpuTimes, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return cpuTimes{}, errors.New("parse /proc/stat: no aggregate cpu line")
	}
	var t cpuTimes
	// user nice system idle iowait irq softirq steal (guest time is
	// counted in user already).
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("parse /proc/stat: field %d: %w", i+1, err)
		}
		if t.total+v < t.total {
			return cpuTimes{}, errors.New("parse /proc/stat: counters overflow")
		}
		t.total += v
		if i != 3 && i != 4 {
			t.busy += v
		}
	}
	return t, nil
}

func readCPUTimes() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	return parseProcStat(b)
}

// waitQuiet waits until at most quietShare of the machine's CPU time was
// busy over quietWindow (or max, when shorter), or max has passed. It
// reports how long it waited and whether the machine was quiet then; where
// /proc/stat cannot be read it does not wait.
func waitQuiet(ctx context.Context, max time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	prev, err := readCPUTimes()
	if err != nil {
		return 0, true, nil
	}
	t := time.NewTicker(min(quietWindow, max))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return time.Since(start), false, ctx.Err()
		case <-t.C:
		}
		cur, err := readCPUTimes()
		if err != nil {
			return time.Since(start), true, nil
		}
		if total := cur.total - prev.total; total > 0 && float64(cur.busy-prev.busy) <= quietShare*float64(total) {
			return time.Since(start), true, nil
		}
		if time.Since(start) >= max {
			return time.Since(start), false, nil
		}
		prev = cur
	}
}
