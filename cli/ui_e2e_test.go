package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// metricValue returns the value of the sample whose name and labels start
// with prefix (e.g. `hindsight_sidecar_calls_total{server="example",tool="login"}`).
func metricValue(text, prefix string) (float64, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestMetricsAndUI drives a real `hindsight wrap` sidecar in front of the
// example server, then scrapes the daemon's metrics over TCP
// (daemon.metrics_listen) for the sidecar's counters, and opens the web
// UI with `hindsight ui --no-open`.
func TestMetricsAndUI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the hindsight binary")
	}
	home := testbin.Home(t)
	port := testkit.FreePort(t)
	cfg := fmt.Sprintf("daemon:\n  metrics_listen: 127.0.0.1:%d\n", port)
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := testbin.Hindsight(t)
	cmd := exec.Command(bin, "wrap", "--name", "example", "--", bin, "example-server")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, outPipe := testkit.StartPiped(t, cmd)
	out := bufio.NewReader(outPipe)
	id := 0
	call := func(method string, params any) string {
		t.Helper()
		id++
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := in.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: read answer: %v\n%s", method, err, stderr.String())
			}
			var m struct {
				ID *int `json:"id"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.ID != nil && *m.ID == id {
				return line
			}
		}
	}
	tool := func(name string, args map[string]any) string {
		return call("tools/call", map[string]any{"name": name, "arguments": args})
	}
	call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "metrics-test", "version": "1"}})
	if _, err := in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	call("tools/list", map[string]any{})
	if a := tool("fetch_report", map[string]any{"month": "2026-03"}); !strings.Contains(a, "401") {
		t.Fatalf("fetch_report before login: %s", a)
	}
	tool("login", map[string]any{"user": "ada", "password": "ghp_Zk3qR8vT2mW9xY4nB6cD1eF5gH7jK0lPq2sT"})
	if a := tool("fetch_report", map[string]any{"month": "2026-03"}); strings.Contains(a, "401") {
		t.Fatalf("fetch_report after login: %s", a)
	}
	in.Close()
	done := make(chan error, 1)
	go func() { _, _ = io.Copy(io.Discard, out); done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wrap: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("wrap did not stop\n%s", stderr.String())
	}

	want := map[string]float64{
		`hindsight_sidecar_calls_total{server="example",tool="fetch_report"}`:                    2,
		`hindsight_sidecar_calls_total{server="example",tool="login"}`:                           1,
		`hindsight_sidecar_call_latency_seconds_count{server="example",tool="login"}`:            1,
		`hindsight_sidecar_call_latency_seconds_bucket{server="example",tool="login",le="+Inf"}`: 1,
		`hindsight_sidecar_steps_recorded_total{server="example"}`:                               5,
	}
	var text string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			text = string(b)
		}
		ok := err == nil
		for k, v := range want {
			if got, found := metricValue(text, k); !found || got < v {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics over TCP lack %v (err %v):\n%s", want, err, grepLines(text, "hindsight_sidecar"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if v, _ := metricValue(text, `hindsight_sidecar_calls_total{server="example",tool="fetch_report"}`); v != 2 {
		t.Errorf("fetch_report calls %v, want 2", v)
	}
	if v, _ := metricValue(text, `hindsight_sidecar_redactions_total{server="example"}`); v < 1 {
		t.Errorf("redactions %v, want the password's", v)
	}
	if !regexp.MustCompile(`hindsight_sidecar_call_failures_total\{code="[^"]+",server="example"\} 1`).MatchString(text) {
		t.Errorf("no failure counted by code:\n%s", grepLines(text, "hindsight_sidecar_call_failures"))
	}
	if !strings.Contains(text, "hindsight_daemon_steps_ingested_total") {
		t.Error("the TCP endpoint does not serve the daemon's own metrics")
	}

	// The web UI: a URL with a token, which turns into a cookie.
	u := strings.TrimSpace(hsOut(t, home, "ui", "--no-open"))
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{48}$`).MatchString(u) {
		t.Fatalf("hindsight ui printed %q", u)
	}
	if again := strings.TrimSpace(hsOut(t, home, "ui", "--no-open")); again != u {
		t.Errorf("a second hindsight ui printed %q, want the running UI's %q", again, u)
	}
	jar, _ := cookiejar.New(nil)
	resp, err := (&http.Client{Jar: jar}).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "fetch_report") {
		t.Errorf("ui: status %d:\n%s", resp.StatusCode, b)
	}
}

// TestMetricsListenLoopbackOnly: the daemon refuses to serve metrics off
// loopback unless told to: on the command line it exits 2 before it
// starts; from the configuration it logs the refusal and runs on.
func TestMetricsListenLoopbackOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the hindsight binary")
	}
	home := testbin.Home(t)
	_, stderr, code := runHindsight(t, home, home, "daemon", "--metrics-listen", "0.0.0.0:9464")
	if code != 2 || !strings.Contains(stderr, "not a loopback address") {
		t.Errorf("exit %d, stderr %q; want 2 and a refusal", code, stderr)
	}

	// From the configuration (a daemon a sidecar starts has no flags): the
	// daemon logs the refusal and serves on.
	home = testbin.Home(t)
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("daemon:\n  metrics_listen: 0.0.0.0:9464\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u := hsOut(t, home, "ui", "--no-open"); !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Errorf("hindsight ui printed %q", u)
	}
	log, _ := os.ReadFile(filepath.Join(home, "logs", "daemon.log"))
	if !strings.Contains(string(log), "no metrics over TCP") || !strings.Contains(string(log), "not a loopback address") {
		t.Errorf("the daemon's log does not say it refused the address:\n%s", log)
	}
}

// hsOut runs the hindsight binary in home and returns its stdout.
func hsOut(t *testing.T, home string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hindsight %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func grepLines(text, sub string) string {
	var keep []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, sub) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// TestPinCommand: `experiences pin` and `unpin` through the real binary.
func TestPinCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the hindsight binary")
	}
	home := testbin.Home(t)
	pack := filepath.Join(home, "pack.jsonl")
	line := `{"id":"p1","server":"fs","tool":"read_file","situation":"reading a missing file","lesson":"List the directory first.","confidence":0.3}` + "\n"
	if err := os.WriteFile(pack, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	hsOut(t, home, "experiences", "import", pack)
	var e struct {
		Pinned bool `json:"pinned"`
	}
	if err := json.Unmarshal([]byte(hsOut(t, home, "experiences", "pin", "p1", "--json")), &e); err != nil || !e.Pinned {
		t.Fatalf("pin: %+v, %v", e, err)
	}
	if out := hsOut(t, home, "experiences", "unpin", "p1"); out != "experience p1 unpinned\n" {
		t.Errorf("unpin printed %q", out)
	}
}
