//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// Variant is one path from the driver to the echo server: a command whose
// stdio speaks MCP, such as the echo server itself, a relay in front of it,
// or `hindsight wrap` in front of it.
type Variant struct {
	Name string
	Argv []string
	Env  []string // added to the environment, KEY=VALUE

	// Home, when set, is the variant's HINDSIGHT_HOME (an absolute path,
	// fresh for this run): Run adds it to the environment and, at the end,
	// stops any daemon the sidecar started for it (see StopDaemons).
	Home string
	// CaptureOff asks the sidecar not to record (HINDSIGHT_CAPTURE=off).
	// At the end Run checks that no outbox appeared under Home, and notes
	// in the report when one did: then capture was on after all.
	CaptureOff bool
}

func (v Variant) env() []string {
	env := slices.Clone(v.Env)
	if v.Home != "" {
		env = append(env, "HINDSIGHT_HOME="+v.Home)
	}
	if v.CaptureOff {
		env = append(env, "HINDSIGHT_CAPTURE=off")
	}
	return env
}

// closeGrace is how long a variant's process may take to exit after its
// stdin closes: a sidecar drains its capture outbox and tells the daemon
// its session ended first.
const closeGrace = 15 * time.Second

// Options say what Run measures. Zero fields take the defaults noted.
type Options struct {
	Variants    []Variant
	Rounds      int           // rounds of interleaved measurements; default 5
	Concurrency []int         // calls in flight; default 1 and 64
	Duration    time.Duration // length of one measurement; default 800ms unless Calls is set
	Calls       int           // cap on calls per measurement; 0: none
	Warmup      int           // calls per variant before the first round; default 500
	Payload     int           // bytes of text in each echo call's arguments; default 256
	// Pace, when > 0, adds a measurement at the concurrency key Paced: one
	// call in flight, started Pace times a second on a fixed schedule, so
	// that the machine idles between calls as it does beside an agent and
	// p50 shows what lies on the path rather than what competes for CPU.
	Pace float64
	// Settle bounds the wait for a quiet machine before each measurement
	// (see waitQuiet); 0: DefaultSettle; negative: no wait.
	Settle   time.Duration
	Progress io.Writer // one line per measurement when set
}

// Paced is the concurrency key of the paced measurements (Options.Pace).
const Paced = 0

// levels returns the concurrency keys measured: Concurrency, then Paced.
func (o *Options) levels() []int {
	if o.Pace > 0 {
		return append(slices.Clone(o.Concurrency), Paced)
	}
	return o.Concurrency
}

// label names a concurrency key for reports.
func (o *Options) label(conc int) string {
	if conc == Paced {
		return fmt.Sprintf("1 in flight, %.0f/s", o.Pace)
	}
	return fmt.Sprintf("%d in flight", conc)
}

func (o *Options) defaults() {
	if o.Rounds <= 0 {
		o.Rounds = 5
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 64}
	}
	if o.Duration <= 0 && o.Calls <= 0 {
		o.Duration = 800 * time.Millisecond
	}
	if o.Warmup <= 0 {
		o.Warmup = 500
	}
	if o.Payload <= 0 {
		o.Payload = 256
	}
	if o.Settle == 0 {
		o.Settle = DefaultSettle
	}
}

// Sample is one measurement: Calls calls of the echo tool with a fixed
// number in flight.
type Sample struct {
	Calls    int
	Elapsed  time.Duration
	P50, P99 time.Duration
	// Syscalls counts the read and write system calls the variant's
	// process made meanwhile, and CPU the CPU time it used (all its
	// threads, not its children); both -1 when unknown.
	Syscalls int64
	CPU      time.Duration
	// AllCPU is the CPU time every process of the measurement used
	// (see allCPU); -1 when unknown.
	AllCPU time.Duration
	// StepCPU and DaemonCPU are the CPU time the variant's own process
	// and its daemons used from the measurement's start until both went
	// idle again (see drainCPU): what its calls cost, capture's trailing
	// work included, the server's and the driver's left out. StepCPU is
	// -1 when unknown.
	StepCPU, DaemonCPU time.Duration
}

// CPUPerCall returns CPU / Calls, or -1 when unknown.
func (s Sample) CPUPerCall() time.Duration {
	if s.CPU < 0 || s.Calls == 0 {
		return -1
	}
	return s.CPU / time.Duration(s.Calls)
}

// AllCPUPerCall returns AllCPU / Calls, or -1 when unknown.
func (s Sample) AllCPUPerCall() time.Duration {
	if s.AllCPU < 0 || s.Calls == 0 {
		return -1
	}
	return s.AllCPU / time.Duration(s.Calls)
}

// SyscallsPerCall returns Syscalls / Calls, or -1 when unknown.
func (s Sample) SyscallsPerCall() float64 {
	if s.Syscalls < 0 || s.Calls == 0 {
		return -1
	}
	return float64(s.Syscalls) / float64(s.Calls)
}

// Rate returns the calls completed per second.
func (s Sample) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Calls) / s.Elapsed.Seconds()
}

// Report holds every measurement of a Run.
type Report struct {
	Options Options
	// Samples[variant][concurrency] lists one sample per round.
	Samples map[string]map[int][]Sample
	// PeakRSS is each variant's process's peak resident set size in bytes
	// (VmHWM) at the end of the run; for a relay or a sidecar that is the
	// relay's own process, not the server behind it.
	PeakRSS map[string]int64
	// PeakAnon is the highest private resident memory (RssAnon) read
	// every 10 ms during each variant's measurements, and Rest each
	// variant's memory restDelay after the last measurement.
	PeakAnon map[string]int64
	Rest     map[string]Memory
	// Memory and DaemonMemory are the peak RSS and PSS of each variant's
	// process and of its daemons, read at the end of every measurement.
	Memory, DaemonMemory map[string]memoryPeak
	Started              time.Time
	Took                 time.Duration
	// DaemonCPU is the CPU time used, by the end of the run, by the
	// daemons a sidecar variant started for its home; TotalCalls counts
	// every call made to each variant, warm-up included.
	DaemonCPU  map[string]time.Duration
	TotalCalls map[string]int
	// Settled is the time spent waiting for a quiet machine before the
	// measurements, Unsettled the measurements that started without it
	// (the wait reached Options.Settle).
	Settled   time.Duration
	Unsettled int
	// Notes are warnings about the run, printed under the tables.
	Notes []string
	// CaptureNotOff lists variants with CaptureOff whose sidecar recorded
	// anyway; capture's checks are then undecided.
	CaptureNotOff []string
}

// Run starts every variant, checks that it echoes, warms it up, then
// measures in rounds: in each round, for each concurrency, every variant in
// turn (A B C A B C…, the starting variant rotating by round), so that
// slow drift of a noisy machine hits all variants alike. Processes stay up
// for the whole run and are closed at the end, after their peak RSS is read.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts.defaults()
	if len(opts.Variants) == 0 {
		return nil, errors.New("run: no variants")
	}
	rep := &Report{Options: opts, Samples: map[string]map[int][]Sample{}, PeakRSS: map[string]int64{},
		PeakAnon: map[string]int64{}, Rest: map[string]Memory{},
		Memory: map[string]memoryPeak{}, DaemonMemory: map[string]memoryPeak{}, DaemonCPU: map[string]time.Duration{}, TotalCalls: map[string]int{}, Started: time.Now()}
	procs := make([]*Process, len(opts.Variants))
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.Close(closeGrace)
			}
		}
		for _, v := range opts.Variants {
			if v.Home != "" {
				// A daemon lets a reflection in flight finish for up to 10 s
				// (reflect.DefaultDrainTimeout) before it stops.
				if err := StopDaemons(v.Home, 15*time.Second); err != nil {
					rep.Notes = append(rep.Notes, err.Error())
				}
			}
		}
	}()
	args := echoArgs(opts.Payload)
	for i, v := range opts.Variants {
		p, err := Start(v.Argv, v.env())
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
		procs[i] = p
		if err := Prepare(ctx, p.Client, args, opts.Warmup); err != nil {
			return nil, fmt.Errorf("variant %s: %w (stderr: %s)", v.Name, err, strings.TrimSpace(p.Stderr()))
		}
		rep.Samples[v.Name] = map[int][]Sample{}
		rep.TotalCalls[v.Name] = opts.Warmup + 2 // and tools/list and the checked echo
	}
	n := len(opts.Variants)
	for round := range opts.Rounds {
		for _, conc := range opts.levels() {
			for k := range n {
				i := (round + k) % n
				v := opts.Variants[i]
				runtime.GC() // the driver's own garbage is nobody's cost
				if opts.Settle > 0 {
					waited, quiet, err := waitQuiet(ctx, opts.Settle)
					if err != nil {
						return nil, fmt.Errorf("wait for a quiet machine: %w", err)
					}
					rep.Settled += waited
					if !quiet {
						rep.Unsettled++
					}
				}
				u0, uErr := procs[i].Usage()
				all0 := allCPU(procs[i], v.Home)
				own0, daemon0 := stepCPU(procs[i].PID(), v.Home)
				stopAnon := sampleAnon(procs[i].PID())
				var s Sample
				var err error
				if conc == Paced {
					s, err = MeasurePaced(ctx, procs[i].Client, args, opts.Pace, opts.Duration, opts.Calls)
				} else {
					s, err = Measure(ctx, procs[i].Client, args, conc, opts.Duration, opts.Calls)
				}
				rep.PeakAnon[v.Name] = max(rep.PeakAnon[v.Name], stopAnon())
				if err != nil {
					return nil, fmt.Errorf("variant %s, round %d, %s: %w (stderr: %s)",
						v.Name, round+1, opts.label(conc), err, strings.TrimSpace(procs[i].Stderr()))
				}
				s.Syscalls, s.CPU, s.AllCPU = -1, -1, -1
				if all1 := allCPU(procs[i], v.Home); all0 >= 0 && all1 >= 0 {
					s.AllCPU = all1 - all0
				}
				if u1, err := procs[i].Usage(); err == nil && uErr == nil {
					s.Syscalls, s.CPU = u1.Syscalls-u0.Syscalls, u1.CPU-u0.CPU
				}
				mem, dmem := rep.Memory[v.Name], rep.DaemonMemory[v.Name]
				mem.observe(procs[i].PID())
				if v.Home != "" {
					observeDaemons(&dmem, v.Home)
				}
				rep.Memory[v.Name], rep.DaemonMemory[v.Name] = mem, dmem
				s.StepCPU = -1
				// Reported at the highest concurrency only: draining takes
				// an idle window or more.
				if conc == slices.Max(opts.Concurrency) {
					if own1, daemon1 := drainCPU(ctx, procs[i].PID(), v.Home, opts.Settle); own0 >= 0 && own1 >= 0 {
						s.StepCPU, s.DaemonCPU = own1-own0, daemon1-daemon0
					}
				}
				rep.Samples[v.Name][conc] = append(rep.Samples[v.Name][conc], s)
				rep.TotalCalls[v.Name] += s.Calls
				if opts.Progress != nil {
					fmt.Fprintf(opts.Progress, "round %d  %-18s %-20s %8.0f calls/s  p50 %-9v p99 %-9v %5.2f syscalls/call  CPU %v/call\n",
						round+1, v.Name, opts.label(conc), s.Rate(), s.P50.Round(100*time.Nanosecond), s.P99.Round(100*time.Nanosecond),
						s.SyscallsPerCall(), s.CPUPerCall().Round(100*time.Nanosecond))
				}
			}
		}
	}
	time.Sleep(restDelay)
	for i, v := range opts.Variants {
		if m, err := ReadMemory(procs[i].PID()); err == nil {
			rep.Rest[v.Name] = m
		}
	}
	for i, v := range opts.Variants {
		if rss, err := procs[i].PeakRSS(); err == nil {
			rep.PeakRSS[v.Name] = rss
		}
		if v.Home != "" {
			if d, err := daemonCPU(v.Home); err == nil && d >= 0 {
				rep.DaemonCPU[v.Name] = d
			}
		}
		// Before Close: a sidecar that stops cleanly may remove its
		// drained outbox.
		recorded := v.CaptureOff && v.Home != "" && hasOutbox(v.Home)
		err := procs[i].Close(closeGrace)
		procs[i] = nil
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
		if recorded {
			rep.CaptureNotOff = append(rep.CaptureNotOff, v.Name)
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: the sidecar recorded although HINDSIGHT_CAPTURE=off "+
				"(an outbox appeared in its home); capture's cost is not measured", v.Name))
		}
	}
	rep.Took = time.Since(rep.Started)
	return rep, nil
}

// echoArgs returns tools/call params for the echo tool carrying size bytes
// of text.
// hasOutbox reports whether a sidecar created a capture outbox under home.
func hasOutbox(home string) bool {
	ents, err := os.ReadDir(filepath.Join(home, "outbox"))
	if err != nil {
		return false
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			return true
		}
	}
	return false
}

func echoArgs(size int) []byte {
	text := strings.Repeat("hindsight ", size/10+1)[:size]
	b, _ := json.Marshal(map[string]any{"name": EchoTool, "arguments": map[string]string{"text": text}})
	return b
}

// Prepare initializes an MCP session on c, checks that the server lists the
// echo tool and echoes args exactly, then makes warmup calls.
func Prepare(ctx context.Context, c *Client, args []byte, warmup int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Initialize(ctx); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	list, err := c.Call(ctx, "tools/list", []byte(`{}`))
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if !gjson.GetBytes(list, `tools.#(name=="`+EchoTool+`")`).Exists() {
		return fmt.Errorf("prepare: tools/list has no %q tool: %s", EchoTool, list)
	}
	res, err := c.Call(ctx, "tools/call", args)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	want := gjson.GetBytes(args, "arguments").Raw
	if got := gjson.GetBytes(res, "content.0.text").String(); got != want {
		return fmt.Errorf("prepare: echo returned %q, want %q", truncate(got, 200), truncate(want, 200))
	}
	if _, err := Measure(ctx, c, args, 8, 0, warmup); err != nil {
		return fmt.Errorf("prepare: warm up: %w", err)
	}
	return nil
}

// Measure keeps conc echo calls in flight on c until d has passed (d > 0)
// and/or maxCalls calls were started (maxCalls > 0), and returns their
// latency percentiles and rate. Calls that fail end the measurement with
// an error.
func Measure(ctx context.Context, c *Client, args []byte, conc int, d time.Duration, maxCalls int) (Sample, error) {
	if conc < 1 {
		conc = 1
	}
	if d <= 0 && maxCalls <= 0 {
		return Sample{}, errors.New("measure: neither a duration nor a call count")
	}
	var (
		started  atomic.Int64
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error]
		lats     = make([][]time.Duration, conc)
	)
	start := time.Now()
	var deadline time.Time
	if d > 0 {
		deadline = start.Add(d)
	}
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, 1024)
			for {
				if maxCalls > 0 && started.Add(1) > int64(maxCalls) {
					break
				}
				t0 := time.Now()
				if !deadline.IsZero() && t0.After(deadline) {
					break
				}
				if _, err := c.Call(ctx, "tools/call", args); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					break
				}
				l = append(l, time.Since(t0))
				if firstErr.Load() != nil {
					break
				}
			}
			lats[w] = l
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if p := firstErr.Load(); p != nil {
		return Sample{}, fmt.Errorf("measure: %w", *p)
	}
	all := slices.Concat(lats...)
	if len(all) == 0 {
		return Sample{}, errors.New("measure: no call completed")
	}
	slices.Sort(all)
	return Sample{Calls: len(all), Elapsed: elapsed, P50: percentile(all, 50), P99: percentile(all, 99)}, nil
}

// MeasurePaced makes one call at a time on c, started rate times a second
// on a fixed schedule (a call that overruns its slot delays only the next
// start), until d has passed and/or maxCalls calls were made, and returns
// their latency percentiles and rate.
func MeasurePaced(ctx context.Context, c *Client, args []byte, rate float64, d time.Duration, maxCalls int) (Sample, error) {
	if rate <= 0 {
		return Sample{}, errors.New("measure paced: rate must be positive")
	}
	if d <= 0 && maxCalls <= 0 {
		return Sample{}, errors.New("measure paced: neither a duration nor a call count")
	}
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var lats []time.Duration
	for i := 0; maxCalls <= 0 || i < maxCalls; i++ {
		next := start.Add(time.Duration(i) * interval)
		if d > 0 && next.Sub(start) >= d {
			break
		}
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		t0 := time.Now()
		if _, err := c.Call(ctx, "tools/call", args); err != nil {
			return Sample{}, fmt.Errorf("measure paced: %w", err)
		}
		lats = append(lats, time.Since(t0))
	}
	if len(lats) == 0 {
		return Sample{}, errors.New("measure paced: no call completed")
	}
	elapsed := time.Since(start)
	slices.Sort(lats)
	return Sample{Calls: len(lats), Elapsed: elapsed, P50: percentile(lats, 50), P99: percentile(lats, 99)}, nil
}

// percentile returns the nearest-rank percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
