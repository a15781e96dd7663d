//go:build linux

package bench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"time"
)

// Variant names the driver and the checks know.
const (
	Direct           = "direct"            // the driver speaks to the echo server itself
	ByteRelay        = "relay"             // through Relay: the floor
	Sidecar          = "sidecar"           // through `hindsight wrap`, as configured by default
	SidecarNoCapture = "sidecar-nocapture" // through `hindsight wrap` with HINDSIGHT_CAPTURE=off
)

// Median returns, for one variant and concurrency, the median over rounds
// of each of p50, p99 and rate (each taken on its own). Calls and Elapsed
// Syscalls, CPU and AllCPU are the sums over rounds. ok is false when there is no sample.
func (r *Report) Median(variant string, conc int) (m Sample, rate float64, ok bool) {
	ss := r.Samples[variant][conc]
	if len(ss) == 0 {
		return Sample{}, 0, false
	}
	p50 := make([]time.Duration, len(ss))
	p99 := make([]time.Duration, len(ss))
	rates := make([]float64, len(ss))
	for i, s := range ss {
		p50[i], p99[i], rates[i] = s.P50, s.P99, s.Rate()
		m.Calls += s.Calls
		m.Elapsed += s.Elapsed
	}
	m.P50, m.P99 = median(p50), median(p99)
	for _, s := range ss {
		if s.Syscalls < 0 || m.Syscalls < 0 {
			m.Syscalls, m.CPU = -1, -1
			continue
		}
		m.Syscalls += s.Syscalls
		m.CPU += s.CPU
	}
	for _, s := range ss {
		if s.AllCPU < 0 || m.AllCPU < 0 {
			m.AllCPU = -1
			continue
		}
		m.AllCPU += s.AllCPU
	}
	return m, median(rates), true
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Check is one target from the design, evaluated on a report.
type Check struct {
	Name     string
	Measured string
	Target   string
	Pass     bool
	NA       bool // the measurement cannot decide (Pass is false)
}

// Verdict returns "ok", "missed", "n/a", or "reported" for a figure that
// has no target.
func (c Check) Verdict() string {
	switch {
	case c.NA && c.Target == "–":
		return "reported"
	case c.NA:
		return "n/a"
	case c.Pass:
		return "ok"
	}
	return "missed"
}

// paired returns the median over rounds of f applied to the samples of a
// and b taken in the same round: variants measured back to back share the
// machine's state, so their difference or ratio is steadier than that of
// their separate medians.
func (r *Report) paired(a, b string, conc int, f func(x, y Sample) float64) float64 {
	return medianOrNaN(r.pairs(a, b, conc, f))
}

// medianOrNaN is the median of v, NaN when v is empty.
func medianOrNaN(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return median(v)
}

// pairs returns f of a's and b's samples of each round, sorted.
func (r *Report) pairs(a, b string, conc int, f func(x, y Sample) float64) []float64 {
	xs, ys := r.Samples[a][conc], r.Samples[b][conc]
	n := min(len(xs), len(ys))
	v := make([]float64, n)
	for i := range n {
		v[i] = f(xs[i], ys[i])
	}
	slices.Sort(v)
	return v
}

// quartiles returns the lower and upper quartiles of sorted v (nearest
// rank), the spread the rounds gave around their median.
func quartiles(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	return v[(len(v)-1)/4], v[len(v)-1-(len(v)-1)/4]
}

func p50Diff(x, y Sample) float64   { return float64(x.P50 - y.P50) }
func p50Added(x, y Sample) float64  { return float64(x.P50)/float64(y.P50) - 1 }
func rateRatio(x, y Sample) float64 { return x.Rate() / y.Rate() }

// Checks evaluates the targets the variants present allow, the relay's for
// sidecar-nocapture (the relay alone) and for sidecar (as shipped). Each
// compares samples of the same round (see paired) and takes the median
// over rounds.
//   - The sidecar's added p50 over direct is at most 1.5× the relay's with
//     one call in flight, back to back and paced. Where the relay measured
//     no slower than direct (common with one call in flight, where process
//     wake-ups dominate) the ratio is undefined and the check says n/a.
//     With more calls in flight it is reported, not checked: p50 is then
//     the in-flight count over throughput, which has its own check.
//   - The sidecar's throughput at the highest concurrency is at least 70%
//     of the relay's.
//   - The sidecar's peak RSS is under 40 MB.
//   - Capture adds under 10% to the sidecar's p50 with one call in flight,
//     back to back and paced (and, reported beside it, what it costs in
//     throughput).
func (r *Report) Checks() []Check {
	var out []Check
	has := func(names ...string) bool {
		for _, n := range names {
			if r.Samples[n] == nil {
				return false
			}
		}
		return true
	}
	concs := r.Options.Concurrency
	top := slices.Max(concs)
	// The relay's targets, for the relay alone (capture off) and for the
	// sidecar as shipped (capture on).
	for _, sc := range []string{SidecarNoCapture, Sidecar} {
		out = append(out, r.relayChecks(sc, top)...)
	}
	if has(Sidecar, SidecarNoCapture) && slices.Contains(r.CaptureNotOff, SidecarNoCapture) {
		out = append(out, Check{Name: "capture's cost in p50, 1 in flight", Target: "< 10%", NA: true,
			Measured: "not measured: " + SidecarNoCapture + " recorded too (HINDSIGHT_CAPTURE=off not honoured)"})
	} else if has(Sidecar, SidecarNoCapture) {
		for _, c := range r.Options.levels() {
			if c != 1 && c != Paced {
				continue
			}
			rounds := r.pairs(Sidecar, SidecarNoCapture, c, p50Added)
			added := medianOrNaN(rounds)
			lo, hi := quartiles(rounds)
			on, _, _ := r.Median(Sidecar, c)
			off, _, _ := r.Median(SidecarNoCapture, c)
			out = append(out, Check{
				Name: "capture's cost in p50, " + r.Options.label(c),
				Measured: fmt.Sprintf("%+.1f%% (rounds' quartiles %+.1f%% … %+.1f%%; medians %s on, %s off)",
					100*added, 100*lo, 100*hi, us(on.P50), us(off.P50)),
				Target: "< 10%", Pass: added < 0.10,
			})
		}
		ratio := r.paired(Sidecar, SidecarNoCapture, top, rateRatio)
		_, onRate, _ := r.Median(Sidecar, top)
		_, offRate, _ := r.Median(SidecarNoCapture, top)
		out = append(out, Check{
			Name:     fmt.Sprintf("capture's cost in throughput, %d in flight", top),
			Measured: fmt.Sprintf("%+.1f%% (medians %.0f on, %.0f off calls/s)", 100*(ratio-1), onRate, offRate),
			Target:   "–", NA: true, // reported, not a target
		})
	}
	return out
}

// relayChecks evaluates the relay's targets for the sidecar variant sc: its
// added p50 over direct against the relay's at every level, its throughput
// against the relay's at the highest concurrency top, and its peak RSS.
func (r *Report) relayChecks(sc string, top int) []Check {
	var out []Check
	if r.Samples[sc] == nil {
		return nil
	}
	if r.Samples[Direct] != nil && r.Samples[ByteRelay] != nil {
		for _, c := range r.Options.levels() {
			relayAdded := time.Duration(r.paired(ByteRelay, Direct, c, p50Diff))
			sideAdded := time.Duration(r.paired(sc, Direct, c, p50Diff))
			ch := Check{Name: sc + "'s added p50 vs relay's, " + r.Options.label(c), Target: "≤ 1.5×"}
			if c > 1 {
				// With c calls in flight p50 is about c ÷ throughput
				// (Little's law): it restates the throughput check,
				// whose target is 70%, and would need the relay's own
				// throughput to meet 1.5×. Reported, not checked.
				ch.Target, ch.NA = "–", true
			}
			if relayAdded <= 0 {
				ch.NA = true
				ch.Measured = fmt.Sprintf("%s %s, relay %s over direct: relay within noise of direct",
					sc, signed(sideAdded), signed(relayAdded))
			} else {
				ratio := float64(sideAdded) / float64(relayAdded)
				ch.Measured = fmt.Sprintf("%.2f× (%s %s, relay %s over direct)", ratio, sc, signed(sideAdded), signed(relayAdded))
				ch.Pass = ratio <= 1.5 && !ch.NA
			}
			out = append(out, ch)
		}
	}
	if r.Samples[ByteRelay] != nil {
		ratio := r.paired(sc, ByteRelay, top, rateRatio)
		_, scRate, _ := r.Median(sc, top)
		_, rl, _ := r.Median(ByteRelay, top)
		out = append(out, Check{
			Name:     fmt.Sprintf("%s's throughput vs relay's, %d in flight", sc, top),
			Measured: fmt.Sprintf("%.0f%% (medians %.0f vs %.0f calls/s)", 100*ratio, scRate, rl),
			Target:   "≥ 70%", Pass: ratio >= 0.7,
		})
	}
	if rss, ok := r.PeakRSS[sc]; ok {
		out = append(out, Check{Name: sc + "'s peak RSS", Measured: mb(rss), Target: "< 40 MB", Pass: rss < 40e6})
	}
	return out
}

// WriteMarkdown writes the results as Markdown: a table of throughput and
// latency (the highest concurrency first, with each variant's share of the
// relay's throughput), a table of the work each variant's process does per
// call and its peak RSS, then the checks and any notes.
func (r *Report) WriteMarkdown(w io.Writer) {
	o := r.Options
	concs := slices.Clone(o.levels())
	slices.SortFunc(concs, func(a, b int) int { return b - a }) // Paced (0) last
	per := o.Duration.String()
	switch {
	case o.Calls > 0 && o.Duration > 0:
		per = fmt.Sprintf("%v or %d calls", o.Duration, o.Calls)
	case o.Calls > 0:
		per = fmt.Sprintf("%d calls", o.Calls)
	}
	fmt.Fprintf(w, "%d rounds, variants interleaved, %s per measurement, medians over rounds; "+
		"echo payload %d B; %d CPUs, %s %s/%s; took %v.\n\n",
		o.Rounds, per, o.Payload, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		r.Took.Round(time.Second))
	if o.Settle > 0 {
		n := o.Rounds * len(concs) * len(o.Variants)
		fmt.Fprintf(w, "Each measurement started on a quiet machine (≤ %.0f%% busy over %v; waited %v in all, "+
			"%d of %d measurements started after %v without).\n\n",
			quietShare*100, quietWindow, r.Settled.Round(100*time.Millisecond), r.Unsettled, n, o.Settle)
	}
	r.writeSpeed(w, concs)
	r.writeWork(w, concs[0])
	r.writeStepCost(w, concs[0])
	checks := r.Checks()
	if len(checks) > 0 {
		fmt.Fprintln(w, "\n| check | measured | target | |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for _, c := range checks {
			verdict := c.Verdict()
			if verdict == "missed" {
				verdict = "**missed**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.Name, c.Measured, c.Target, verdict)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
}

// writeSpeed writes throughput and latency per variant and concurrency,
// with each variant's share of the relay's throughput (paired by round) at
// the highest concurrency.
func (r *Report) writeSpeed(w io.Writer, concs []int) {
	vsRelay := r.Samples[ByteRelay] != nil
	fmt.Fprint(w, "| path |")
	for i, c := range concs {
		fmt.Fprintf(w, " calls/s (%s) |", r.Options.label(c))
		if i == 0 && vsRelay {
			fmt.Fprint(w, " vs relay |")
		}
		fmt.Fprint(w, " p50 | p99 |")
	}
	fmt.Fprint(w, "\n|---|")
	for i := range concs {
		fmt.Fprint(w, "--:|--:|--:|")
		if i == 0 && vsRelay {
			fmt.Fprint(w, "--:|")
		}
	}
	fmt.Fprintln(w)
	for _, v := range r.Options.Variants {
		fmt.Fprintf(w, "| %s |", v.Name)
		for i, c := range concs {
			share := i == 0 && vsRelay
			m, rate, ok := r.Median(v.Name, c)
			switch {
			case !ok && share:
				fmt.Fprint(w, " – | – | – | – |")
			case !ok:
				fmt.Fprint(w, " – | – | – |")
			case share:
				fmt.Fprintf(w, " %s | %.0f%% | %s | %s |", r.rate(v.Name, c, rate), 100*r.paired(v.Name, ByteRelay, c, rateRatio), us(m.P50), us(m.P99))
			default:
				fmt.Fprintf(w, " %s | %s | %s |", r.rate(v.Name, c, rate), us(m.P50), us(m.P99))
			}
		}
		fmt.Fprintln(w)
	}
}

// rate formats a variant's median throughput at concurrency c, with its
// quartiles over the rounds when there are four rounds or more.
func (r *Report) rate(variant string, c int, median float64) string {
	ss := r.Samples[variant][c]
	if len(ss) < 4 {
		return fmt.Sprintf("%.0f", median)
	}
	rates := make([]float64, len(ss))
	for i, s := range ss {
		rates[i] = s.Rate()
	}
	slices.Sort(rates)
	q1, q3 := quartiles(rates)
	return fmt.Sprintf("%.0f (%.0f–%.0f)", median, q1, q3)
}

// writeWork writes, per variant, what its own process spent per call at
// concurrency c (CPU time and read/write system calls, summed over
// rounds), what a sidecar's daemon spent per call over the whole run, and
// the process's memory: its peak RSS, the peak of its private part (file
// pages of the binary, shared by every process running it, left out), and
// both at rest after the run.
func (r *Report) writeWork(w io.Writer, c int) {
	fmt.Fprintf(w, "\n| path (its own process) | CPU/call (%s) | syscalls/call | daemon CPU/call | all processes' CPU/call | peak RSS | peak private | RSS at rest (private) |\n", r.Options.label(c))
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, v := range r.Options.Variants {
		cpu, sys := "–", "–"
		if m, _, ok := r.Median(v.Name, c); ok && m.Syscalls >= 0 {
			cpu, sys = us(m.CPUPerCall()), fmt.Sprintf("%.2f", m.SyscallsPerCall())
		}
		daemon := "–"
		if d, ok := r.DaemonCPU[v.Name]; ok && r.TotalCalls[v.Name] > 0 {
			daemon = us(d / time.Duration(r.TotalCalls[v.Name]))
		}
		all := "–"
		if m, _, ok := r.Median(v.Name, c); ok && m.AllCPU >= 0 {
			all = us(m.AllCPUPerCall())
		}
		rss, anon, rest := "–", "–", "–"
		if b, ok := r.PeakRSS[v.Name]; ok {
			rss = mb(b)
		}
		if b, ok := r.PeakAnon[v.Name]; ok && b > 0 {
			anon = mb(b)
		}
		if m, ok := r.Rest[v.Name]; ok {
			rest = fmt.Sprintf("%s (%s)", mb(m.RSS), mb(m.Anon))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", v.Name, cpu, sys, daemon, all, rss, anon, rest)
	}
}

// us formats a latency: microseconds, or milliseconds from 1 ms up.
func us(d time.Duration) string {
	if d >= time.Millisecond || d <= -time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f µs", float64(d)/1e3)
}

// signed formats a latency difference with its sign.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + us(d)
	}
	return "−" + us(-d)
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
