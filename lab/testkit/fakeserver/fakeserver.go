// Package fakeserver is a scripted MCP server for tests that need exact
// control over bytes and process behaviour: unknown fields and methods,
// crashes, hangs, grandchildren, huge results. Real servers are used
// wherever they can show the behaviour; this one covers the rest.
//
// A test runs it by re-executing its own binary with EnvMode set and a
// test function that calls Main first:
//
//	func TestFakeServer(t *testing.T) { fakeserver.Main() }
//
// then starts os.Args[0] with Args() and Env(mode).
package fakeserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidwall/gjson"
)

// Environment variables that configure the fake server.
const (
	EnvMode   = "HINDSIGHT_FAKESERVER"        // the mode; unset: not a fake server
	EnvRecord = "HINDSIGHT_FAKESERVER_RECORD" // file every received line is appended to
	EnvPIDs   = "HINDSIGHT_FAKESERVER_PIDS"   // file the server (and any grandchild) appends its pid to
	// EnvTools names a file whose content, read at each tools/list,
	// replaces ToolsList as its result: a test rewrites it to change the
	// server's tools between sessions, or within one (then sends
	// notifications/tools/list_changed with fake/say).
	EnvTools = "HINDSIGHT_FAKESERVER_TOOLS"
)

// Modes.
const (
	ModeMCP        = "mcp"        // a small MCP server (see Serve)
	ModeHang       = "hang"       // reads nothing, writes nothing, exits on SIGTERM
	ModeStubborn   = "stubborn"   // ignores stdin EOF and SIGTERM
	ModeGrandchild = "grandchild" // starts a sleeping grandchild, then serves MCP
	ModeSleep      = "sleep"      // sleeps (the grandchild)
	ModeFailStart  = "failstart"  // writes to stderr and exits 1 at once
	ModeFlaky      = "flaky"      // the 2nd to 4th start fail like failstart; others serve MCP (needs EnvPIDs)
)

// Args returns the arguments that make a test binary run only the test
// function named test (which calls Main).
func Args(test string) []string {
	return []string{"-test.run=^" + test + "$", "-test.count=1"}
}

// Env returns the environment for a fake server in mode, recording what it
// receives to record and its pid to pids (either may be ""). A test binary
// built with -race sleeps a second at exit by default; the fake server
// must exit as promptly as a real one, so GORACE turns that off.
func Env(mode, record, pids string) []string {
	return append(os.Environ(), Vars(mode, record, pids)...)
}

// Vars returns the variables Env adds to the environment.
func Vars(mode, record, pids string) []string {
	return []string{EnvMode + "=" + mode, EnvRecord + "=" + record, EnvPIDs + "=" + pids, "GORACE=atexit_sleep_ms=0"}
}

// Main runs the fake server and exits when EnvMode is set; otherwise it
// returns at once.
func Main() {
	mode := os.Getenv(EnvMode)
	if mode == "" {
		return
	}
	if p := os.Getenv(EnvPIDs); p != "" {
		appendFile(p, strconv.Itoa(os.Getpid())+"\n")
	}
	switch mode {
	case ModeHang:
		select {}
	case ModeStubborn:
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		select {}
	case ModeSleep:
		time.Sleep(time.Hour)
		os.Exit(0)
	case ModeFailStart:
		fmt.Fprintln(os.Stderr, "fakeserver: failing at start on purpose")
		os.Exit(1)
	case ModeFlaky:
		b, _ := os.ReadFile(os.Getenv(EnvPIDs))
		if n := strings.Count(string(b), "\n"); n >= 2 && n <= 4 {
			fmt.Fprintln(os.Stderr, "fakeserver: flaky start", n, "fails")
			os.Exit(1)
		}
	case ModeGrandchild:
		cmd := exec.Command(os.Args[0], os.Args[1:]...)
		cmd.Env = append(os.Environ(), EnvMode+"="+ModeSleep)
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver: start grandchild:", err)
			os.Exit(1)
		}
	}
	if mode == ModeGoSDK {
		if err := serveGoSDK(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	err := Serve(os.Stdin, os.Stdout, os.Getenv(EnvRecord))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ToolsList is the fake server's tools/list result: a tool whose input
// schema has a root anyOf (which mcp-go's Tool type drops), and members no
// SDK knows.
const ToolsList = `{"tools":[{"name":"echo","description":"echoes","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"x-vendor":{"k":[1,2.50,"three"]}},` +
	`{"name":"either","inputSchema":{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}],"properties":{"a":{"type":"string"},"b":{"type":"number"}}},"outputSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}},"annotations":{"readOnlyHint":true,"x-future":"yes"},"icons":[{"src":"data:image/png;base64,AAAA","mimeType":"image/png"}],"_meta":{"vendor.example/flag":true}}],` +
	`"nextCursor":null,"_meta":{"vendor.example/page":1},"x-unknown-top":{"nested":[{"deep":true}]}}`

// Serve speaks a small MCP server on in and out until in ends:
//
//   - initialize: a result with an unknown member; tools/list: ToolsList,
//     or the content of the file EnvTools names;
//   - tools/call echo {text}: a text result; either: structured content;
//     big {size}: a text of size bytes; crash {status}: exit at once;
//     slow {ms}: answers after ms milliseconds; fail: an isError result;
//   - fake/echo: a result whose "line" is the request exactly as received;
//   - fake/digest: the size and SHA-256 (hex) of the request as received;
//   - notification fake/say {lines: [string], junk: n}: writes each string
//     verbatim as a line, so a test can make the server send any bytes,
//     then a line of n junk bytes if n > 0, all in one write;
//   - notification fake/stderr {lines: [string]}: writes them to stderr;
//   - any other request: method not found.
//
// Every line received is appended to the file record, if set.
func Serve(in io.Reader, out io.Writer, record string) error {
	var rec *os.File
	if record != "" {
		f, err := os.OpenFile(record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		rec = f
	}
	w := &writer{w: bufio.NewWriter(out)}
	br := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if rec != nil {
				rec.Write(line)
			}
			handle(w, line)
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

type writer struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (w *writer) line(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w.WriteString(s)
	w.w.WriteByte('\n')
	w.w.Flush()
}

// lines writes ls and then, if junk > 0, a line of junk bytes that is not
// JSON, all in one write.
func (w *writer) lines(ls []string, junk int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range ls {
		w.w.WriteString(l)
		w.w.WriteByte('\n')
	}
	if junk > 0 {
		w.w.WriteString(strings.Repeat("z", junk))
		w.w.WriteByte('\n')
	}
	w.w.Flush()
}

func (w *writer) result(id json.RawMessage, result string) {
	w.line(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`)
}

func handle(w *writer, line []byte) {
	// gjson, not encoding/json: a test binary built with -race decodes a
	// 20 MB line with encoding/json for many seconds.
	r := gjson.GetManyBytes(line, "id", "method")
	method := r[1].String()
	if method == "" {
		return // a response, a batch or junk: recorded only
	}
	var id json.RawMessage
	if r[0].Exists() {
		id = json.RawMessage(r[0].Raw)
	}
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Name            string          `json:"name"`
		Arguments       json.RawMessage `json:"arguments"`
		Lines           []string        `json:"lines"`
		Junk            int             `json:"junk"`
	}
	if method != "fake/digest" {
		if params := gjson.GetBytes(line, "params"); params.Exists() {
			json.Unmarshal([]byte(params.Raw), &p)
		}
	}
	if id == nil {
		switch method {
		case "fake/say":
			w.lines(p.Lines, p.Junk)
		case "fake/stderr":
			for _, l := range p.Lines {
				fmt.Fprintln(os.Stderr, l)
			}
		}
		return
	}
	switch method {
	case "initialize":
		pv := p.ProtocolVersion
		if pv == "" {
			pv = "2025-06-18"
		}
		pvJSON, _ := json.Marshal(pv)
		w.result(id, `{"protocolVersion":`+string(pvJSON)+`,"capabilities":{"tools":{"listChanged":true},"x-experimental-cap":{}},"serverInfo":{"name":"fakeserver","version":"1.0.0"},"instructions":"fake","x-unknown":[1,{"a":null}]}`)
	case "tools/list":
		result := ToolsList
		if file := os.Getenv(EnvTools); file != "" {
			if b, err := os.ReadFile(file); err == nil {
				result = strings.TrimSpace(string(b))
			}
		}
		w.result(id, result)
	case "tools/call":
		callTool(w, id, p.Name, p.Arguments)
	case "fake/echo":
		s, _ := json.Marshal(strings.TrimRight(string(line), "\r\n"))
		w.result(id, `{"line":`+string(s)+`}`)
	case "fake/digest":
		l := bytes.TrimRight(line, "\r\n")
		sum := sha256.Sum256(l)
		w.result(id, `{"bytes":`+strconv.Itoa(len(l))+`,"sha256":"`+hex.EncodeToString(sum[:])+`"}`)
	case "ping":
		w.result(id, `{}`)
	default:
		w.line(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32601,"message":"Method not found"}}`)
	}
}

func callTool(w *writer, id json.RawMessage, name string, rawArgs json.RawMessage) {
	var args struct {
		Text   string `json:"text"`
		Size   int    `json:"size"`
		Status int    `json:"status"`
		MS     int    `json:"ms"`
	}
	json.Unmarshal(rawArgs, &args)
	switch name {
	case "echo":
		s, _ := json.Marshal(args.Text)
		w.result(id, `{"content":[{"type":"text","text":`+string(s)+`}]}`)
	case "either":
		w.result(id, `{"content":[{"type":"text","text":"{\"ok\":true}"}],"structuredContent":{"ok":true},"_meta":{"x":1}}`)
	case "big":
		w.result(id, `{"content":[{"type":"text","text":"`+strings.Repeat("x", args.Size)+`"}]}`)
	case "crash":
		os.Exit(args.Status)
	case "slow":
		go func() {
			time.Sleep(time.Duration(args.MS) * time.Millisecond)
			w.result(id, `{"content":[{"type":"text","text":"slow done"}]}`)
		}()
	case "fail":
		w.result(id, `{"content":[{"type":"text","text":"it failed"}],"isError":true}`)
	default:
		w.line(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32602,"message":"unknown tool"}}`)
	}
}

func appendFile(path, s string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	f.WriteString(s)
	f.Close()
}
