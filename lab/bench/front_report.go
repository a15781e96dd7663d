//go:build linux

package bench

import (
	"fmt"
	"io"
	"math"
	"time"
)

// frontStat picks one figure of a FrontSample.
type frontStat func(FrontSample) float64

func frontRate(s FrontSample) float64 { return s.Rate() }
func frontP50(s FrontSample) float64  { return float64(s.P50) }
func frontP99(s FrontSample) float64  { return float64(s.P99) }
func frontCPU(s FrontSample) float64  { return float64(s.CPUPerCall()) }
func frontAll(s FrontSample) float64  { return float64(s.CPUPerCall() + s.DaemonPerCall()) }

// Median returns the median over rounds of one figure of a variant.
func (r *FrontReport) Median(variant string, f frontStat) float64 {
	var v []float64
	for _, s := range r.Samples[variant] {
		v = append(v, f(s))
	}
	return medianOrNaN(v)
}

// Ratio returns the median over rounds of a's figure over b's, both
// measured in the same round; rounds where b's figure is 0 (CPU below
// the clock tick) are left out, and with none left it is NaN.
func (r *FrontReport) Ratio(a, b string, f frontStat) float64 {
	as, bs := r.Samples[a], r.Samples[b]
	var v []float64
	for i := range min(len(as), len(bs)) {
		if d := f(bs[i]); d > 0 {
			v = append(v, f(as[i])/d)
		}
	}
	return medianOrNaN(v)
}

// times formats a ratio, "–" when there is none.
func times(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x)
}

// WriteMarkdown writes the medians of every variant and, against the
// first variant (the floor), the same-round ratios and serve's goals.
func (r *FrontReport) WriteMarkdown(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "%d clients × %d echo calls (one session and one echo child each), %d interleaved rounds, medians.\n\n",
		o.Clients, o.Calls, o.Rounds)
	fmt.Fprintln(w, "| front door | calls/s | p50 | p99 | CPU/call (own process) | daemon CPU/call | peak RSS | peak PSS |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, v := range o.Variants {
		n := v.Name
		daemon := "—"
		if v.Home != "" {
			daemon = us(time.Duration(r.Median(n, func(s FrontSample) float64 { return float64(s.DaemonPerCall()) })))
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %s |\n", n, r.Median(n, frontRate),
			us(time.Duration(r.Median(n, frontP50))), us(time.Duration(r.Median(n, frontP99))), us(time.Duration(r.Median(n, frontCPU))), daemon,
			mb(int64(r.Median(n, func(s FrontSample) float64 { return float64(s.PeakRSS) }))),
			mb(int64(r.Median(n, func(s FrontSample) float64 { return float64(s.PeakPSS) }))))
	}
	if len(o.Variants) < 2 {
		return
	}
	floor := o.Variants[0].Name
	fmt.Fprintf(w, "\nSame-round ratios against %s (median of the rounds' ratios):\n\n", floor)
	fmt.Fprintln(w, "| front door | calls/s | p50 | p99 | own CPU/call | own + daemon CPU/call |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|")
	for _, v := range o.Variants[1:] {
		n := v.Name
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", n, times(r.Ratio(n, floor, frontRate)),
			times(r.Ratio(n, floor, frontP50)), times(r.Ratio(n, floor, frontP99)), times(r.Ratio(n, floor, frontCPU)),
			times(r.Ratio(n, floor, frontAll)))
	}
}
