//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
)

// TestMain lets the test binary be the echo server ("echo") and the byte
// relay ("relay CMD…") for the processes the tests and benchmarks start.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "echo":
			if err := ServeEcho(os.Stdin, os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		case "relay":
			if err := Relay(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(testbin.Main(m))
}

// variants returns the variants of the path to the echo server: this test
// binary as the echo server, as a relay in front of it, and the real
// hindsight binary in front of it.
func variants(t testing.TB, names ...string) []Variant {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	echo := []string{self, "echo"}
	var out []Variant
	for _, n := range names {
		v := Variant{Name: n}
		switch n {
		case Direct:
			v.Argv = echo
		case ByteRelay:
			v.Argv = append([]string{self, "relay"}, echo...)
		case Sidecar, SidecarNoCapture:
			v.Argv = append([]string{testbin.Hindsight(t), "wrap", "--name", "echo", "--"}, echo...)
			v.Home = t.TempDir()
			v.CaptureOff = n == SidecarNoCapture
			t.Cleanup(func() {
				// Run stops them; a benchmark, which starts processes
				// itself, relies on this.
				if err := StopDaemons(v.Home, 10*time.Second); err != nil {
					t.Error(err)
				}
			})
		default:
			t.Fatalf("unknown variant %q", n)
		}
		out = append(out, v)
	}
	return out
}

// pipeEcho runs ServeEcho in-process and returns a client on it.
func pipeEcho(t *testing.T) (*Client, io.Closer) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := ServeEcho(inR, outW)
		outW.Close()
		done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeEcho: %v", err)
		}
	})
	return NewClient(outR, inW), inW
}

func TestSmokeEchoAnswers(t *testing.T) {
	c, _ := pipeEcho(t)
	ctx := context.Background()
	tests := []struct {
		name, method, params string
		wantPath, want       string // gjson path in the result, and its raw value
		wantErr              string
	}{
		{name: "initialize", method: "initialize", params: `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`,
			wantPath: "protocolVersion", want: `"2025-06-18"`},
		{name: "initialize default version", method: "initialize", params: `{}`, wantPath: "protocolVersion", want: `"2025-11-25"`},
		{name: "server/discover", method: "server/discover", params: `{}`, wantPath: "capabilities.tools", want: `{}`},
		{name: "ping", method: "ping", wantPath: "@this", want: `{}`},
		{name: "tools/list", method: "tools/list", params: `{}`, wantPath: "tools.0.name", want: `"echo"`},
		{name: "echo", method: "tools/call", params: `{"name":"echo","arguments":{"text":"a\"b\n<c>","n":[1,2]}}`,
			wantPath: "content.0.text", want: `"{\"text\":\"a\\\"b\\n<c>\",\"n\":[1,2]}"`},
		{name: "echo without arguments", method: "tools/call", params: `{"name":"echo"}`, wantPath: "content.0.text", want: `"{}"`},
		{name: "unknown tool", method: "tools/call", params: `{"name":"nope"}`, wantErr: `"code":-32602`},
		{name: "unknown method", method: "resources/list", params: `{}`, wantErr: `"code":-32601`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params []byte
			if tt.params != "" {
				params = []byte(tt.params)
			}
			res, err := c.Call(ctx, tt.method, params)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := gjson.GetBytes(res, tt.wantPath).Raw
			if tt.wantPath == "@this" {
				got = string(res)
			}
			if !reflect.DeepEqual(gjson.Parse(got).Value(), gjson.Parse(tt.want).Value()) {
				t.Fatalf("%s = %s, want %s (result %s)", tt.wantPath, got, tt.want, res)
			}
		})
	}
}

// TestSmokeEchoRawLines checks what the echo server does with input no
// client library would send: notifications, responses, bad JSON, and lines
// longer than its read buffer.
func TestSmokeEchoRawLines(t *testing.T) {
	big := strings.Repeat("x", 300<<10)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
		`not json`,
		`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"echo","arguments":{"t":"` + big + `"}}}`,
		``,
	}, "\n")
	var out bytes.Buffer
	if err := ServeEcho(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2 (a parse error and the echo):\n%.300s", len(lines), out.String())
	}
	if !strings.Contains(lines[0], `"id":null`) || !strings.Contains(lines[0], "-32700") {
		t.Errorf("bad JSON answered with %s, want a parse error with a null id", lines[0])
	}
	r := gjson.Parse(lines[1])
	if r.Get("id").Raw != `"s"` || r.Get("result.content.0.text").String() != `{"t":"`+big+`"}` {
		t.Errorf("long line not echoed intact (id %s, %d bytes)", r.Get("id").Raw, len(lines[1]))
	}
}

func TestSmokeManyInFlight(t *testing.T) {
	c, _ := pipeEcho(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Go(func() {
			for i := range 50 {
				text := fmt.Sprintf("w%d-%d", w, i)
				res, err := c.Call(ctx, "tools/call", fmt.Appendf(nil, `{"name":"echo","arguments":{"text":%q}}`, text))
				if err != nil {
					errs <- err
					return
				}
				if got, want := gjson.GetBytes(res, "content.0.text").String(), fmt.Sprintf(`{"text":%q}`, text); got != want {
					errs <- fmt.Errorf("call got %s, want %s: responses crossed", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSmokeClientServerGone(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := NewClient(outR, inW)
	go func() {
		io.ReadAll(inR) // swallow requests, answer nothing
	}()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "ping", nil)
		errc <- err
	}()
	outW.Close() // the server goes away with the call pending
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), ErrClosed.Error()) {
			t.Fatalf("err = %v, want %v", err, ErrClosed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("call still waiting 10s after the server closed its output")
	}
	inW.Close()
}

// TestSmokeRelayFaithful sends a message of several MB and a burst of
// pipelined calls through a real relay process and checks every byte.
func TestSmokeRelayFaithful(t *testing.T) {
	p, err := Start(variants(t, ByteRelay)[0].Argv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(10 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	big := strings.Repeat("0123456789", 400_000)
	res, err := p.Call(ctx, "tools/call", []byte(`{"name":"echo","arguments":{"text":"`+big+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(res, "content.0.text").String(); got != `{"text":"`+big+`"}` {
		t.Fatalf("4 MB echo through the relay came back as %d bytes", len(got))
	}
	if _, err := Measure(ctx, p.Client, echoArgs(64), 32, 0, 2000); err != nil {
		t.Fatal(err)
	}
}

// TestSmokeRun runs the whole measurement on every variant with tiny counts.
func TestSmokeRun(t *testing.T) {
	opts := Options{
		Variants:    variants(t, Direct, ByteRelay, Sidecar, SidecarNoCapture),
		Rounds:      2,
		Concurrency: []int{1, 8},
		Calls:       50,
		Warmup:      20,
		Payload:     100,
		Settle:      -1, // TestWaitQuiet and TestSmokeDriver wait
	}
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range opts.Variants {
		for _, c := range opts.Concurrency {
			ss := rep.Samples[v.Name][c]
			if len(ss) != 2 {
				t.Fatalf("%s, %d in flight: %d samples, want 2", v.Name, c, len(ss))
			}
			for _, s := range ss {
				if s.Calls != 50 || s.P50 <= 0 || s.P99 < s.P50 || s.Rate() <= 0 {
					t.Errorf("%s, %d in flight: implausible sample %+v", v.Name, c, s)
				}
			}
		}
		if rep.PeakRSS[v.Name] < 1<<20 {
			t.Errorf("%s: peak RSS %d bytes, want at least 1 MiB of a real process", v.Name, rep.PeakRSS[v.Name])
		}
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	for _, want := range []string{"| direct |", "| relay |", "| sidecar |", "| sidecar-nocapture |",
		"calls/s (8 in flight)", "sidecar's added p50 vs relay's, 1 in flight", "sidecar's peak RSS",
		"sidecar's throughput vs relay's, 8 in flight", "capture's cost in p50"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
}

func TestPercentileAndMedian(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name     string
		sorted   []time.Duration
		p50, p99 time.Duration
	}{
		{"one", ms(7), 7 * time.Millisecond, 7 * time.Millisecond},
		{"two", ms(1, 9), 1 * time.Millisecond, 9 * time.Millisecond},
		{"hundred", hundred, 50 * time.Millisecond, 99 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, 50); got != tt.p50 {
			t.Errorf("%s: p50 = %v, want %v", tt.name, got, tt.p50)
		}
		if got := percentile(tt.sorted, 99); got != tt.p99 {
			t.Errorf("%s: p99 = %v, want %v", tt.name, got, tt.p99)
		}
	}
	if got := median([]float64{5, 1, 3}); got != 3 {
		t.Errorf("median of 5,1,3 = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of 4,1,3,2 = %v", got)
	}
}

func TestChecks(t *testing.T) {
	s := func(p50us int, rate float64) []Sample {
		d := time.Duration(p50us) * time.Microsecond
		return []Sample{{Calls: int(rate), Elapsed: time.Second, P50: d, P99: 2 * d}}
	}
	rep := &Report{
		Options: Options{Concurrency: []int{1, 64}},
		Samples: map[string]map[int][]Sample{
			Direct:           {1: s(40, 20000), 64: s(300, 100000)},
			ByteRelay:        {1: s(60, 12000), 64: s(400, 80000)},
			Sidecar:          {1: s(75, 10000), 64: s(500, 50000)},
			SidecarNoCapture: {1: s(70, 11000), 64: s(450, 60000)},
		},
		PeakRSS: map[string]int64{Sidecar: 45e6},
	}
	got := map[string]Check{}
	for _, c := range rep.Checks() {
		got[c.Name] = c
	}
	want := map[string]bool{
		"sidecar's added p50 vs relay's, 1 in flight":   false, // 35 vs 20 µs: 1.75×
		"sidecar's added p50 vs relay's, 64 in flight":  false, // 200 vs 100 µs: 2×, reported only
		"sidecar's throughput vs relay's, 64 in flight": false, // 62.5%
		"sidecar's peak RSS":                            false, // 45 MB
		"capture's cost in p50, 1 in flight":            true,  // +7.1%
	}
	for name, pass := range want {
		c, ok := got[name]
		if !ok {
			t.Errorf("no check %q in %v", name, slices.Sorted(maps.Keys(got)))
			continue
		}
		if c.Pass != pass {
			t.Errorf("%s: pass = %v, want %v (%s)", name, c.Pass, pass, c.Measured)
		}
	}
	if m := got["capture's cost in p50, 1 in flight"].Measured; !strings.HasPrefix(m, "+7.1%") {
		t.Errorf("capture's cost = %q, want +7.1%%", m)
	}
	if v := got["sidecar's added p50 vs relay's, 64 in flight"].Verdict(); v != "reported" {
		t.Errorf("added p50 at 64 in flight has verdict %q, want reported", v)
	}
	if v := got["capture's cost in throughput, 64 in flight"].Verdict(); v != "reported" {
		t.Errorf("capture's throughput cost has verdict %q, want reported", v)
	}

	// A relay that measured faster than direct leaves the ratio undefined;
	// a sidecar within targets passes. Rounds are paired: round 2's
	// slowness hits every variant and must not decide the outcome.
	rep.Samples = map[string]map[int][]Sample{
		Direct:    {1: slices.Concat(s(50, 20000), s(500, 2000)), 64: slices.Concat(s(300, 100000), s(3000, 10000))},
		ByteRelay: {1: slices.Concat(s(45, 21000), s(450, 2100)), 64: slices.Concat(s(400, 80000), s(4000, 8000))},
		Sidecar:   {1: slices.Concat(s(52, 19000), s(520, 1900)), 64: slices.Concat(s(440, 70000), s(4400, 7000))},
	}
	rep.PeakRSS = map[string]int64{Sidecar: 20e6}
	got = map[string]Check{}
	for _, c := range rep.Checks() {
		got[c.Name] = c
	}
	for name, verdict := range map[string]string{
		"sidecar's added p50 vs relay's, 1 in flight":   "n/a",
		"sidecar's added p50 vs relay's, 64 in flight":  "reported", // 1.4×: restates throughput
		"sidecar's throughput vs relay's, 64 in flight": "ok",       // 87.5%
		"sidecar's peak RSS":                            "ok",
	} {
		if v := got[name].Verdict(); v != verdict {
			t.Errorf("%s: verdict %q, want %q (%s)", name, v, verdict, got[name].Measured)
		}
	}
	if _, ok := got["capture's cost in p50, 1 in flight"]; ok {
		t.Error("capture checked without a sidecar-nocapture variant")
	}
}

// FuzzEchoReply checks that the echo server answers any line with nothing
// or with one valid JSON-RPC message.
func FuzzEchoReply(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"initialize","params":{"protocolVersion":"\u00e9"}}`))
	f.Add([]byte(`{"id":{},"method":7}`))
	f.Add([]byte(`[1,2`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if i := bytes.IndexByte(line, '\n'); i >= 0 && i < len(line)-1 {
			return // ServeEcho never passes a line with a newline inside
		}
		resp := echoReply(line)
		if resp == nil {
			return
		}
		if !json.Valid(resp) {
			t.Fatalf("reply to %q is not JSON: %s", line, resp)
		}
		if bytes.IndexByte(resp, '\n') >= 0 {
			t.Fatalf("reply to %q has a newline: %s", line, resp)
		}
	})
}

// BenchmarkRelay measures one echo tools/call round trip over real stdio
// pipes to real processes: direct, through the byte relay, and through
// `hindsight wrap` with capture on and off. With 1 in flight ns/op is the
// latency of a call; with 64 in flight it is the inverse of throughput.
// Each also reports p50-ns, p99-ns, calls/s, and the CPU time, read/write
// system calls and peak RSS of the process the client talks to.
func BenchmarkRelay(b *testing.B) {
	for _, name := range []string{Direct, ByteRelay, Sidecar, SidecarNoCapture} {
		b.Run(name, func(b *testing.B) {
			for _, conc := range []int{1, 64} {
				b.Run(fmt.Sprintf("inflight=%d", conc), func(b *testing.B) {
					benchVariant(b, variants(b, name)[0], conc)
				})
			}
		})
	}
}

func benchVariant(b *testing.B, v Variant, conc int) {
	p, err := Start(v.Argv, v.env())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := p.Close(closeGrace); err != nil {
			b.Error(err)
		}
	}()
	if err := Prepare(context.Background(), p.Client, echoArgs(256), 500); err != nil {
		b.Fatalf("%v (stderr: %s)", err, p.Stderr())
	}
	u0, err0 := p.Usage()
	benchCalls(b, p.Client, conc)
	if u1, err := p.Usage(); err == nil && err0 == nil {
		b.ReportMetric(float64(u1.CPU-u0.CPU)/float64(b.N), "cpu-ns/call")
		b.ReportMetric(float64(u1.Syscalls-u0.Syscalls)/float64(b.N), "syscalls/call")
	}
	if rss, err := p.PeakRSS(); err == nil {
		b.ReportMetric(float64(rss)/1e6, "peak-RSS-MB")
	}
}

// benchCalls makes b.N echo calls on c with conc in flight and reports
// their p50, p99 and rate.
func benchCalls(b *testing.B, c *Client, conc int) {
	ctx := context.Background()
	args := echoArgs(256)
	b.ReportAllocs()
	var lats []time.Duration
	if conc == 1 {
		lats = make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			t0 := time.Now()
			if _, err := c.Call(ctx, "tools/call", args); err != nil {
				b.Fatal(err)
			}
			lats = append(lats, time.Since(t0))
		}
	} else {
		lats = benchInFlight(b, ctx, c, args, conc)
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		b.ReportMetric(float64(percentile(lats, 50)), "p50-ns")
		b.ReportMetric(float64(percentile(lats, 99)), "p99-ns")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkStdio runs the proxy's stdio transport (proxy.Stdio, no hooks)
// inside the benchmark process, on real pipes, in front of a real echo
// server process, so that -cpuprofile and -memprofile show the sidecar's
// relay path (the client's work is in the profile too, under Client).
func BenchmarkStdio(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("inflight=%d", conc), func(b *testing.B) {
			inR, inW, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			outR, outW, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			st := &proxy.Stdio{Command: self, Args: []string{"echo"}, Server: "echo",
				Logger: slog.New(slog.DiscardHandler)}
			done := make(chan error, 1)
			go func() {
				done <- st.Run(context.Background(), inR, outW)
				outW.Close()
			}()
			c := NewClient(outR, inW)
			if err := Prepare(context.Background(), c, echoArgs(256), 500); err != nil {
				b.Fatal(err)
			}
			benchCalls(b, c, conc)
			inW.Close()
			if err := <-done; err != nil {
				b.Error(err)
			}
			inR.Close()
			outR.Close()
		})
	}
}

// benchInFlight keeps conc calls in flight for b.N calls: each loop
// iteration hands one call to a free worker.
func benchInFlight(b *testing.B, ctx context.Context, c *Client, args []byte, conc int) []time.Duration {
	work := make(chan struct{})
	lats := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	var failed sync.Once
	for w := range conc {
		wg.Go(func() {
			for range work {
				t0 := time.Now()
				if _, err := c.Call(ctx, "tools/call", args); err != nil {
					failed.Do(func() { b.Error(err) })
					continue
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		})
	}
	for b.Loop() {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	return slices.Concat(lats...)
}

// BenchmarkConn measures the proxy core's work for one tools/call request
// and its response, without transport and without hooks.
func BenchmarkConn(b *testing.B) {
	c := &proxy.Conn{
		Session: &proxy.Session{ID: "bench", Server: "echo", Transport: "stdio"},
		Logger:  slog.New(slog.DiscardHandler),
	}
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + string(echoArgs(256)) + `}`)
	resp := echoReply(req)
	b.SetBytes(int64(len(req) + len(resp)))
	b.ReportAllocs()
	for b.Loop() {
		if a := c.FromClient(req); a.Forward == nil {
			b.Fatal("request not forwarded")
		}
		if out := c.FromServer(resp); out == nil {
			b.Fatal("response not relayed")
		}
	}
}

func TestCaptureNotOff(t *testing.T) {
	home := t.TempDir()
	if hasOutbox(home) {
		t.Fatal("outbox found in an empty home")
	}
	if err := os.MkdirAll(filepath.Join(home, "outbox", ".rejected"), 0o700); err != nil {
		t.Fatal(err)
	}
	if hasOutbox(home) {
		t.Fatal("outbox found where only .rejected exists")
	}
	if err := os.MkdirAll(filepath.Join(home, "outbox", "20261130T153314-1238-d6e3b3f4"), 0o700); err != nil {
		t.Fatal(err)
	}
	if !hasOutbox(home) {
		t.Fatal("a sidecar's outbox was not found")
	}

	one := []Sample{{Calls: 100, Elapsed: time.Second, P50: time.Millisecond, P99: 2 * time.Millisecond}}
	rep := &Report{
		Options:       Options{Concurrency: []int{1, 64}},
		Samples:       map[string]map[int][]Sample{Sidecar: {1: one, 64: one}, SidecarNoCapture: {1: one, 64: one}},
		CaptureNotOff: []string{SidecarNoCapture},
	}
	for _, c := range rep.Checks() {
		if strings.HasPrefix(c.Name, "capture's") && c.Verdict() != "n/a" {
			t.Errorf("%s: verdict %q with capture on in both variants, want n/a", c.Name, c.Verdict())
		}
	}
}

func TestQuartiles(t *testing.T) {
	for _, tc := range []struct {
		v      []float64
		lo, hi float64
	}{
		{[]float64{5}, 5, 5},
		{[]float64{1, 2, 3, 4, 5}, 2, 4},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 7},
		{[]float64{1, 2}, 1, 2},
	} {
		if lo, hi := quartiles(tc.v); lo != tc.lo || hi != tc.hi {
			t.Errorf("quartiles(%v) = %v, %v; want %v, %v", tc.v, lo, hi, tc.lo, tc.hi)
		}
	}
	if lo, hi := quartiles(nil); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("quartiles(nil) = %v, %v; want NaN", lo, hi)
	}
}
