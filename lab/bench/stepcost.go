//go:build linux

package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// idleWindow is how long a measured process and its daemon must use no
// more than idleSlack of CPU for drainCPU to call them done: longer than a
// sidecar's 250 ms delivery linger, so that the last batch is delivered
// and ingested inside it.
const (
	idleWindow = 400 * time.Millisecond
	idleSlack  = 2 * time.Millisecond
)

// stepCPU returns the CPU time used so far by a measured variant's own
// process and by its daemons (0 when home is "" or has none): the
// processes a captured step costs, without the server behind the sidecar
// or the driver. own is -1 when the process's time cannot be read.
func stepCPU(pid int, home string) (own, daemon time.Duration) {
	own, err := cpuTime(pid)
	if err != nil {
		return -1, 0
	}
	if home != "" {
		if d, err := daemonCPU(home); err == nil && d > 0 {
			daemon = d
		}
	}
	return own, daemon
}

// drainCPU waits, up to limit (at least one idleWindow when limit allows
// one), until the variant's process and its
// daemons have gone idle (no more than idleSlack of CPU over idleWindow)
// and returns stepCPU then: a capturing sidecar works off what it queued
// after the last answer, and its daemon ingests the last batch later
// still, and that work belongs to the measurement's calls.
func drainCPU(ctx context.Context, pid int, home string, limit time.Duration) (own, daemon time.Duration) {
	own, daemon = stepCPU(pid, home)
	deadline := time.Now().Add(limit)
	for own >= 0 && time.Until(deadline) >= idleWindow {
		select {
		case <-ctx.Done():
			return own, daemon
		case <-time.After(idleWindow):
		}
		o, d := stepCPU(pid, home)
		if o < 0 {
			break
		}
		idle := o+d-own-daemon <= idleSlack
		own, daemon = o, max(d, daemon)
		if idle {
			break
		}
	}
	return own, daemon
}

// memoryPeak records the highest resident set (VmHWM) and proportional
// set (PSS) seen of a process; PSS has no kernel peak, so it is read at
// the end of every measurement, when a flood's memory is at its height.
type memoryPeak struct{ RSS, PSS int64 }

func (m *memoryPeak) observe(pid int) {
	if v, err := ProcStatus(pid, "VmHWM"); err == nil {
		m.RSS = max(m.RSS, v)
	}
	if v, err := procPSS(pid); err == nil {
		m.PSS = max(m.PSS, v)
	}
}

// observeDaemons records the memory of home's daemons (their sum, if a
// home has more than one) into m.
func observeDaemons(m *memoryPeak, home string) {
	pids, err := daemonsOf(home)
	if err != nil || len(pids) == 0 {
		return
	}
	var sum memoryPeak
	for _, pid := range pids {
		var one memoryPeak
		one.observe(pid)
		sum.RSS += one.RSS
		sum.PSS += one.PSS
	}
	m.RSS, m.PSS = max(m.RSS, sum.RSS), max(m.PSS, sum.PSS)
}

// StepCPUPerCall returns (StepCPU + DaemonCPU) / Calls, or -1 when
// unknown.
func (s Sample) StepCPUPerCall() time.Duration {
	if s.StepCPU < 0 || s.Calls == 0 {
		return -1
	}
	return (s.StepCPU + s.DaemonCPU) / time.Duration(s.Calls)
}

// stepCPUMedian is the median over rounds of a variant's CPU per call at
// concurrency c, its own and its daemon's, and of its daemon's part
// alone; -1 when no round measured it.
func (r *Report) stepCPUMedian(variant string, c int) (all, daemon time.Duration) {
	var v, d []time.Duration
	for _, s := range r.Samples[variant][c] {
		if x := s.StepCPUPerCall(); x >= 0 {
			v = append(v, x)
			d = append(d, s.DaemonCPU/time.Duration(s.Calls))
		}
	}
	if len(v) == 0 {
		return -1, -1
	}
	return median(v), median(d)
}

// writeStepCost writes the reference table of what one captured step
// costs: per variant, the CPU per call of its process and its daemon at
// the highest concurrency top (measured until both went idle again, the
// server's and the driver's CPU left out) and its ratio to the byte
// relay's, p50 and p99 with one call in flight and throughput at top as
// ratios to the relay's measured in the same rounds, and the peak RSS and
// PSS of the process and of its daemon.
func (r *Report) writeStepCost(w io.Writer, top int) {
	relay := r.Samples[ByteRelay] != nil
	fmt.Fprintf(w, "\n| path (own process + daemon) | CPU/call (%d in flight) | daemon's part | × relay | p50 (1) × relay | p99 (1) × relay | calls/s (%d) × relay | peak RSS / PSS | daemon peak RSS / PSS |\n", top, top)
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	relayCPU, _ := r.stepCPUMedian(ByteRelay, top)
	cell := func(ok bool, f string, a ...any) string {
		if !ok {
			return "–"
		}
		return fmt.Sprintf(f, a...)
	}
	for _, v := range r.Options.Variants {
		cpu, daemon := r.stepCPUMedian(v.Name, top)
		p50 := r.paired(v.Name, ByteRelay, 1, func(x, y Sample) float64 { return float64(x.P50) / float64(y.P50) })
		p99 := r.paired(v.Name, ByteRelay, 1, func(x, y Sample) float64 { return float64(x.P99) / float64(y.P99) })
		mem, dmem := r.Memory[v.Name], r.DaemonMemory[v.Name]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", v.Name,
			cell(cpu >= 0, "%s", us(cpu)),
			cell(v.Home != "" && daemon >= 0, "%s", us(daemon)),
			cell(relay && cpu >= 0 && relayCPU > 0, "%.1f×", float64(cpu)/float64(relayCPU)),
			cell(relay && p50 == p50, "%.2f×", p50),
			cell(relay && p99 == p99, "%.2f×", p99),
			cell(relay, "%.2f×", r.paired(v.Name, ByteRelay, top, rateRatio)),
			cell(mem.RSS > 0, "%s / %s", mb(mem.RSS), mb(mem.PSS)),
			cell(dmem.RSS > 0, "%s / %s", mb(dmem.RSS), mb(dmem.PSS)))
	}
}
