//go:build linux

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidwall/gjson"
)

// AddrArg stands for the listening address in a FrontVariant's Argv.
const AddrArg = "{addr}"

// FrontVariant is one HTTP front door RunFront measures: a process started
// from Argv (AddrArg replaced by a free loopback address) that serves
// Streamable HTTP at http://ADDR/mcp, one stdio child per session.
type FrontVariant struct {
	Name string
	Argv []string
	Env  []string // added to this process's environment
	Home string   // HINDSIGHT_HOME, whose daemon's CPU is counted ("" for none)
}

// FrontOptions say what RunFront measures. Zero fields take the defaults
// noted.
type FrontOptions struct {
	Variants []FrontVariant
	Rounds   int // interleaved rounds; default 3
	Clients  int // sessions, each one client with one call in flight; default 50
	Calls    int // echo calls per client; default 100
	Payload  int // bytes of text in each echo call; default 256
	Progress io.Writer
}

// FrontSample is one variant's measurement in one round.
type FrontSample struct {
	Calls     int
	Elapsed   time.Duration // the calls' wall time, from the first to the last
	P50, P99  time.Duration
	CPU       time.Duration // the front door's own process (children excluded)
	DaemonCPU time.Duration // its daemon's; -1 when it has none
	PeakRSS   int64         // VmHWM of the front door's process
	PeakPSS   int64         // the highest PSS read every 50 ms during the calls
}

// Rate is calls per second.
func (s FrontSample) Rate() float64 { return float64(s.Calls) / s.Elapsed.Seconds() }

// CPUPerCall is the front door's own CPU per call.
func (s FrontSample) CPUPerCall() time.Duration { return s.CPU / time.Duration(s.Calls) }

// DaemonPerCall is the daemon's CPU per call (0 without a daemon).
func (s FrontSample) DaemonPerCall() time.Duration {
	return max(s.DaemonCPU, 0) / time.Duration(s.Calls)
}

// FrontReport holds every sample of a RunFront, by variant, in round order.
type FrontReport struct {
	Options FrontOptions
	Samples map[string][]FrontSample
}

// settleWait bounds how long a measurement waits, after its last call, for
// the front door and its daemon to finish the work the calls left (a
// capturing sidecar's queue, the daemon's ingest), which is counted.
const settleWait = 5 * time.Second

// RunFront measures each variant in turn, Rounds times, the first variant
// rotating by round: the front door is started, Clients sessions are
// opened (initialize, notifications/initialized), then every client makes
// Calls echo calls one after another, all clients at once; the front door
// is stopped with SIGTERM after each measurement.
func RunFront(ctx context.Context, opts FrontOptions) (*FrontReport, error) {
	if opts.Rounds <= 0 {
		opts.Rounds = 3
	}
	if opts.Clients <= 0 {
		opts.Clients = 50
	}
	if opts.Calls <= 0 {
		opts.Calls = 100
	}
	if opts.Payload <= 0 {
		opts.Payload = 256
	}
	rep := &FrontReport{Options: opts, Samples: map[string][]FrontSample{}}
	n := len(opts.Variants)
	for round := range opts.Rounds {
		for i := range n {
			v := opts.Variants[(round+i)%n]
			s, err := measureFront(ctx, v, opts)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round+1, v.Name, err)
			}
			rep.Samples[v.Name] = append(rep.Samples[v.Name], s)
			if opts.Progress != nil {
				fmt.Fprintf(opts.Progress, "round %d %-12s %6.0f calls/s p50 %v p99 %v cpu/call %v daemon/call %v peak RSS %s PSS %s\n",
					round+1, v.Name, s.Rate(), s.P50, s.P99, s.CPUPerCall(), s.DaemonPerCall(), mb(s.PeakRSS), mb(s.PeakPSS))
			}
		}
	}
	return rep, nil
}

func measureFront(ctx context.Context, v FrontVariant, opts FrontOptions) (FrontSample, error) {
	addr, err := freeAddr()
	if err != nil {
		return FrontSample{}, err
	}
	argv := slices.Clone(v.Argv)
	for i, a := range argv {
		argv[i] = strings.ReplaceAll(a, AddrArg, addr)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), v.Env...)
	if v.Home != "" {
		cmd.Env = append(cmd.Env, "HINDSIGHT_HOME="+v.Home)
	}
	stderr := &tailBuffer{max: 16 << 10}
	cmd.Stderr, cmd.Stdout = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return FrontSample{}, fmt.Errorf("start %s: %w", argv[0], err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	s, err := driveFront(ctx, cmd.Process.Pid, "http://"+addr+"/mcp", v.Home, opts)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-waited:
	case <-time.After(closeGrace):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		if err == nil {
			err = fmt.Errorf("stop %s: no exit within %v of SIGTERM; killed", v.Name, closeGrace)
		}
	}
	if err != nil {
		return s, fmt.Errorf("%w (output: %s)", err, strings.TrimSpace(stderr.String()))
	}
	return s, nil
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// driveFront opens the sessions on the front door pid serves at url, makes
// the calls and reads what they cost.
func driveFront(ctx context.Context, pid int, url, home string, opts FrontOptions) (FrontSample, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: opts.Clients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	if err := waitListening(ctx, url, 30*time.Second); err != nil {
		return FrontSample{}, err
	}
	sessions := make([]*httpSession, opts.Clients)
	var wg sync.WaitGroup
	errs := make([]error, opts.Clients)
	for i := range sessions {
		wg.Go(func() { sessions[i], errs[i] = openSession(ctx, hc, url) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return FrontSample{}, err
	}
	args := echoArgs(opts.Payload)
	want := gjson.GetBytes(args, "arguments").Raw
	cpu0, err := cpuTime(pid)
	if err != nil {
		return FrontSample{}, err
	}
	d0, _ := daemonCPU(home)
	stopPSS := samplePSS(pid)
	lats := make([][]time.Duration, opts.Clients)
	start := time.Now()
	for i, s := range sessions {
		wg.Go(func() {
			l := make([]time.Duration, 0, opts.Calls)
			for range opts.Calls {
				t0 := time.Now()
				res, err := s.call(ctx, "tools/call", args)
				if err == nil && gjson.GetBytes(res, "content.0.text").String() != want {
					err = fmt.Errorf("echo returned %q", truncate(string(res), 200))
				}
				if err != nil {
					errs[i] = err
					break
				}
				l = append(l, time.Since(t0))
			}
			lats[i] = l
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	peakPSS := stopPSS()
	if err := errors.Join(errs...); err != nil {
		return FrontSample{}, err
	}
	s := FrontSample{Elapsed: elapsed, PeakPSS: peakPSS}
	if s.PeakRSS, err = peakRSS(pid); err != nil {
		return s, err
	}
	if s.CPU, s.DaemonCPU, err = settledCPU(pid, home); err != nil {
		return s, err
	}
	s.CPU -= cpu0
	if s.DaemonCPU >= 0 {
		s.DaemonCPU -= max(d0, 0)
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	s.Calls, s.P50, s.P99 = len(all), percentile(all, 50), percentile(all, 99)
	return s, nil
}

// settledCPU returns the CPU time of pid and of home's daemon once neither
// grew over 300 ms (or after settleWait).
func settledCPU(pid int, home string) (own, daemon time.Duration, err error) {
	deadline := time.Now().Add(settleWait)
	for {
		if own, err = cpuTime(pid); err != nil {
			return 0, 0, err
		}
		daemon, _ = daemonCPU(home)
		if time.Now().After(deadline) {
			return own, daemon, nil
		}
		time.Sleep(300 * time.Millisecond)
		o2, err := cpuTime(pid)
		if err != nil {
			return 0, 0, err
		}
		if d2, _ := daemonCPU(home); o2 == own && d2 == daemon {
			return own, daemon, nil
		}
	}
}

// samplePSS reads pid's PSS every 50 ms until the returned function is
// called, which returns the highest value read.
func samplePSS(pid int) func() int64 {
	stop := make(chan struct{})
	done := make(chan int64, 1)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		var peak int64
		for {
			if v, err := procPSS(pid); err == nil {
				peak = max(peak, v)
			}
			select {
			case <-stop:
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(stop); return <-done }
}

// waitListening waits until something accepts connections at url's host.
func waitListening(ctx context.Context, url string, limit time.Duration) error {
	host := strings.TrimPrefix(url, "http://")
	host, _, _ = strings.Cut(host, "/")
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", host, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("wait for %s: %w", host, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// httpSession is an MCP client session over Streamable HTTP, one call in
// flight at a time.
type httpSession struct {
	hc   *http.Client
	url  string
	id   string // Mcp-Session-Id
	next int
}

// openSession initializes a session and sends notifications/initialized.
func openSession(ctx context.Context, hc *http.Client, url string) (*httpSession, error) {
	s := &httpSession{hc: hc, url: url}
	if _, err := s.call(ctx, "initialize", []byte(`{"protocolVersion":"2025-11-25","capabilities":{},`+
		`"clientInfo":{"name":"servebench","version":"1.0.0"}}`)); err != nil {
		return nil, err
	}
	if s.id == "" {
		return nil, errors.New("initialize: the answer has no Mcp-Session-Id")
	}
	if _, err := s.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), ""); err != nil {
		return nil, err
	}
	return s, nil
}

// call sends a request and returns its result.
func (s *httpSession) call(ctx context.Context, method string, params []byte) ([]byte, error) {
	s.next++
	id := strconv.Itoa(s.next)
	msg := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":`)
	msg = append(append(msg, params...), '}')
	resp, err := s.post(ctx, msg, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if e := gjson.GetBytes(resp, "error"); e.Exists() {
		return nil, fmt.Errorf("%s: server answered with an error: %s", method, e.Raw)
	}
	return []byte(gjson.GetBytes(resp, "result").Raw), nil
}

// post sends one message and, when id is set, returns the response with
// that id from a JSON or event-stream answer.
func (s *httpSession) post(ctx context.Context, msg []byte, id string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(msg))
	if err != nil {
		return nil, fmt.Errorf("post: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("post: HTTP %d: %s", resp.StatusCode, truncate(string(body), 200))
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		s.id = sid
	}
	if id == "" {
		return nil, nil
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return body, nil
	}
	for line := range bytes.Lines(body) {
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if ok && gjson.GetBytes(data, "id").Raw == id {
			return bytes.TrimSpace(data), nil
		}
	}
	return nil, fmt.Errorf("the event stream has no response to %s: %s", id, truncate(string(body), 200))
}
