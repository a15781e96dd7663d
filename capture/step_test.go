package capture

import (
	"bufio"
	"bytes"
	"encoding/json"
	"hash/maphash"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/wire"
)

// trafficLine is one recorded exchange in testdata/traffic/*.jsonl.
type trafficLine struct {
	Session   string `json:"session"`
	Server    string `json:"server"`
	Transport string `json:"transport"`
	HostPID   int    `json:"host_pid"`
	TaskEnv   string `json:"task_env"`
	Client    struct {
		Name, Version, Protocol string
	} `json:"client"`
	Direction     hindsight.Direction   `json:"direction"`
	Method        string                `json:"method"`
	Request       json.RawMessage       `json:"request"`
	Response      json.RawMessage       `json:"response"`
	Start         time.Time             `json:"start"`
	LatencyMS     float64               `json:"latency_ms"`
	Cancelled     bool                  `json:"cancelled"`
	Failure       string                `json:"failure"`
	Notifications int                   `json:"notifications"`
	Local         bool                  `json:"local"`
	Injected      []hindsight.Injection `json:"injected"`
}

// bigText stands in for "BIG" in recorded traffic: a body over the golden
// tests' MaxBodyBytes.
var bigText = strings.Repeat("entity observation line; ", 200)

// loadTraffic reads a recorded traffic file into exchanges, sharing one
// Session per session id as the proxy does.
func loadTraffic(t testing.TB, path string) []*proxy.Exchange {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sessions := map[string]*proxy.Session{}
	var out []*proxy.Exchange
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l trafficLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		s := sessions[l.Session]
		if s == nil {
			s = &proxy.Session{ID: l.Session, Server: l.Server, Transport: l.Transport, HostPID: l.HostPID, TaskID: l.TaskEnv}
			s.SetClient(l.Client.Name, l.Client.Version, l.Client.Protocol)
			sessions[l.Session] = s
		}
		ex := &proxy.Exchange{Session: s, Direction: l.Direction, Method: l.Method,
			Request: l.Request, Started: l.Start, Ended: l.Start.Add(time.Duration(l.LatencyMS * float64(time.Millisecond))),
			Cancelled: l.Cancelled, Failure: l.Failure, Notifications: l.Notifications, Local: l.Local, Injected: l.Injected}
		if len(l.Response) > 0 && string(l.Response) != "null" {
			ex.Response = bytes.Replace(l.Response, []byte(`"BIG"`), wire.AppendPlainString(nil, bigText), 1)
		}
		out = append(out, ex)
	}
	return out
}

// TestStepsGolden builds and tags the steps of recorded traffic and
// compares them with testdata/golden (go test -run TestStepsGolden -update).
func TestStepsGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/traffic/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no recorded traffic")
	}
	r := testRedactor(t)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(name, func(t *testing.T) {
			tagger := NewTagger()
			var steps []hindsight.Step
			for _, ex := range loadTraffic(t, file) {
				s := BuildStep(ex, r, 2048)
				tagger.Tag(&s)
				steps = append(steps, s)
			}
			got, err := json.MarshalIndent(steps, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "golden", name+".json")
			testkit.Golden(t, golden, got)
		})
	}
}

// FuzzBuildStep checks that any request/response pair builds a step that
// encodes as JSON (every raw field stays valid JSON, truncated or not).
func FuzzBuildStep(f *testing.F) {
	r := testRedactor(f)
	for _, ex := range loadTraffic(f, "testdata/traffic/http-retry.jsonl") {
		f.Add(string(ex.Request), string(ex.Response), 64)
	}
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":"ééééé"}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"HTTP 500","data":"ΩΩΩΩ"}}`, 3)
	f.Fuzz(func(t *testing.T, req, resp string, max int) {
		if !json.Valid([]byte(req)) || (resp != "" && !json.Valid([]byte(resp))) {
			return // the proxy hands over valid JSON only
		}
		max = max%4096 + 1
		if max < 1 {
			max = -max + 1
		}
		ex := &proxy.Exchange{Session: &proxy.Session{ID: "f"}, Method: "tools/call", Request: []byte(req), Started: time.Now(), Ended: time.Now()}
		if resp != "" {
			ex.Response = []byte(resp)
		}
		s := BuildStep(ex, r, max)
		NewTagger().Tag(&s)
		if _, err := json.Marshal(&s); err != nil {
			t.Fatalf("step does not encode: %v", err)
		}
	})
}

// FuzzArgsHash holds argsHash to hashing the compacted arguments: the same
// call with other whitespace is the same call.
func FuzzArgsHash(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `{"path":"/a b","n":[1, 2]}`, "{\n\t\"q\" : \"x \\\" y\"\n}", `"s"`, `[ ]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			return
		}
		if got, want := argsHash(raw), maphash.Bytes(argsSeed, b.Bytes()); got != want {
			t.Fatalf("argsHash(%q) differs from the hash of %q", raw, b.Bytes())
		}
	})
}

// TestBuildStepDuplicateMembers: of duplicate members the first is read,
// as a path search reads it.
func TestBuildStepDuplicateMembers(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ex := &proxy.Exchange{Method: "tools/call", Direction: hindsight.ClientToServer,
		Request:  []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1},"name":"b","arguments":{"x":2},"_meta":{"io.hindsight/task":"t1"}}}`),
		Response: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true},"result":{"content":[]}}`)}
	s := BuildStep(ex, r, 0)
	if s.Tool != "a" || string(s.Arguments) != `{"x":1}` || s.ExplicitTask != "t1" || !s.IsError {
		t.Errorf("tool %q, arguments %s, task %q, is_error %v; want a, {\"x\":1}, t1, true", s.Tool, s.Arguments, s.ExplicitTask, s.IsError)
	}
}

// TestBuildStepDeepBody: arguments nested deeper than MaxBodyDepth (the
// relay passes them) are stored truncated, with their size and hash, so
// that the step stays readable by encoding/json (which stops at 10,000
// levels) and the daemon takes it.
func TestBuildStepDeepBody(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const depth = 9997
	args := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	ex := &proxy.Exchange{Method: "tools/call", Direction: hindsight.ClientToServer,
		Request:  []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deep","arguments":{"a":` + args + `}}}`),
		Response: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)}
	s := BuildStep(ex, r, 0)
	fields := map[string]bool{}
	for _, tr := range s.Truncated {
		fields[tr.Field] = tr.OriginalSize > 2*depth && len(tr.SHA256) == 64
	}
	if !fields["arguments"] || !fields["request"] || s.Tool != "deep" {
		t.Fatalf("truncated %+v, tool %q", s.Truncated, s.Tool)
	}
	b, err := wire.AppendStep(nil, &s)
	if err != nil {
		t.Fatal(err)
	}
	var back hindsight.Step
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("the step does not decode: %v", err)
	}
	// Bodies within the limit are kept whole (the request nests the
	// arguments three levels down).
	ok := strings.Repeat("[", MaxBodyDepth-4) + strings.Repeat("]", MaxBodyDepth-4)
	ex.Request = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deep","arguments":{"a":` + ok + `}}}`)
	if s := BuildStep(ex, r, 0); len(s.Truncated) != 0 {
		t.Fatalf("a request %d deep was truncated: %+v", MaxBodyDepth, s.Truncated)
	}
}

// TestBuildStepInvalidUTF8: invalid UTF-8 inside a JSON string is stored
// replaced (U+FFFD), each run counted as a redaction, so the step encodes
// as valid UTF-8 JSON.
func TestBuildStepInvalidUTF8(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ex := &proxy.Exchange{Method: "tools/call", Direction: hindsight.ClientToServer,
		Request:  []byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"a\xff\xfeb\xc3\"}}}"),
		Response: []byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\xe2\x82\"}]}}")}
	req := string(ex.Request)
	s := BuildStep(ex, r, 0)
	if string(ex.Request) != req {
		t.Fatal("the relayed request was modified")
	}
	if s.Redactions != 3 {
		t.Errorf("redactions %d, want 3 (two runs in the request, one in the response)", s.Redactions)
	}
	b, err := wire.AppendCompactStep(nil, &s)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		t.Fatalf("step encodes as invalid UTF-8 JSON: %q", b)
	}
	if !strings.Contains(string(s.Arguments), "a\uFFFDb\uFFFD") {
		t.Errorf("arguments %s", s.Arguments)
	}
}

// FuzzCompactDerived holds wire.AppendCompactStep's shortcut (bodies that
// are slices of the request or response are taken as derived without
// parsing them again) to what BuildStep does: the compact encoding of a
// built step decodes to the step its full encoding holds, and leaves out
// the bodies the plain comparison with wire.RequestArguments and
// wire.ResponseResult would.
func FuzzCompactDerived(f *testing.F) {
	r := testRedactor(f)
	for _, ex := range loadTraffic(f, "testdata/traffic/http-retry.jsonl") {
		f.Add("tools/call", string(ex.Request), string(ex.Response))
	}
	for _, c := range [][3]string{
		{"tools/call", `{"params":{"name":"a","arguments":{"x":1},"arguments":{"x":2}}}`, `{"result":{"a":1},"result":2}`},
		{"tools/call", `{"params":{"argu\u006dents":{"x":1},"arguments":{"x":2}}}`, `{"res\u0075lt":{"a":1},"result":2}`},
		{"tools/call", `{"params":{"arguments":{"x":1}},"params":{"arguments":{"x":2}}}`, `{"id":1,"result":null}`},
		{"tools/call", `{"par\u0061ms":{"arguments":{"x":1}},"params":{"arguments":{"x":2}}}`, `{"result":{"result":1}}`},
		{"tools/call", `{"params":{"name":"a","arguments":{"arguments":{"x":1}}}}`, `{"error":{"code":1,"message":"m"}}`},
		{"tools/list", `{"params":{"cursor":"c"},"params":{"cursor":"d"}}`, `{"result":{"tools":[]}}`},
		{"tools/list", `{"params":[1,2]}`, `{"result":"s"}`},
		{"tools/call", `{"params":{"arguments":"\u00e9\ud800"}}`, "{\"result\":\"\xff\"}"},
		{"tools/call", `{"params":{"arguments":{"token":"ghp_0123456789abcdefghijABCDEFGHIJ012345"}}}`, `{"result":{"password":"hunter2hunter2"}}`},
	} {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, method, req, resp string) {
		if !json.Valid([]byte(req)) || (resp != "" && !json.Valid([]byte(resp))) || !utf8.ValidString(method) {
			return // the proxy hands over valid JSON only, and decoded methods
		}
		ex := &proxy.Exchange{Session: &proxy.Session{ID: "f"}, Method: method, Request: []byte(req), Started: time.Now(), Ended: time.Now()}
		if resp != "" {
			ex.Response = []byte(resp)
		}
		s := BuildStep(ex, r, 0)
		full, err := wire.AppendStep(nil, &s)
		if err != nil {
			t.Fatal(err)
		}
		compact, err := wire.AppendCompactStep(nil, &s)
		if err != nil {
			t.Fatal(err)
		}
		// Both decoded the same way, as the daemon reads them.
		var back, fullBack hindsight.Step
		if err := wire.UnmarshalCompact(compact, &back); err != nil {
			t.Fatalf("decode %s: %v", compact, err)
		}
		if err := wire.UnmarshalCompact(full, &fullBack); err != nil {
			t.Fatalf("decode %s: %v", full, err)
		}
		again, _ := wire.AppendStep(nil, &back)
		if want, _ := wire.AppendStep(nil, &fullBack); !bytes.Equal(again, want) {
			t.Fatalf("compact %s\ndecodes to %s\nwant %s", compact, again, want)
		}
		var want []string
		if len(s.Arguments) > 0 && bytes.Equal(wire.RequestArguments(s.Method, s.Request), s.Arguments) {
			want = append(want, wire.DerivedArguments)
		}
		if len(s.Result) > 0 && bytes.Equal(wire.ResponseResult(s.Response), s.Result) {
			want = append(want, wire.DerivedResult)
		}
		var got struct{ Derived []string }
		if err := json.Unmarshal(compact, &got); err != nil || strings.Join(got.Derived, ",") != strings.Join(want, ",") {
			t.Fatalf("compact %s: derived %q, want %q (%v)", compact, got.Derived, want, err)
		}
	})
}

// FuzzReadFields holds readRequest and readResponse's pass over the
// members to the gjson reading they fall back to: where the pass answers,
// it gives the same fields, its bodies the same slices of the message.
func FuzzReadFields(f *testing.F) {
	for _, ex := range loadTraffic(f, "testdata/traffic/http-retry.jsonl") {
		f.Add(string(ex.Request), string(ex.Response))
	}
	for _, c := range [][2]string{
		{`{"params":{"name":"a","arguments":{"x":1},"name":"b","arguments":2,"_meta":{"io.hindsight/task":"t"}}}`, `{"result":{"isError":true,"isError":false},"result":1,"error":{"code":-1,"message":"m","data":[1]}}`},
		{`{"params":{"n\u0061me":"a"}}`, `{"res\u0075lt":1,"result":2}`},
		{` { "params" : [ 1 ] , "params" : {} } `, ` { "result" : null , "error" : "e" } `},
		{`{"params":{"name":"\u00e9\n","arguments":"s","_meta":{"io.hindsight/task":1}}}`, `{"result":{"isError":"true"}}`},
		{`{"params":{"name":12.5e3,"arguments":null}}`, `{"result":{"content":[],"isError":1}}`},
		{`{"params":"x"}`, `[{"result":1}]`},
		{`{"params":{"name":"a",}}`, `{"result":1,}`},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, req, resp string) {
		reqb, respb := []byte(req), []byte(resp)
		for _, method := range []string{"tools/call", "resources/read"} {
			if got, ok := readRequestFast(reqb, method); ok {
				want := readRequestGJSON(reqb, method)
				if !sameSlice(got.args, want.args, reqb) || got.tool != want.tool || got.task != want.task {
					t.Fatalf("%s %s: read %+v, gjson %+v", method, req, got, want)
				}
			}
		}
		if got, ok := readResponseFast(respb); ok {
			want := readResponseGJSON(respb)
			if !sameSlice(got.result, want.result, respb) || got.isError != want.isError || (got.err == nil) != (want.err == nil) ||
				got.err != nil && (got.err.Code != want.err.Code || got.err.Message != want.err.Message || !sameSlice(got.err.Data, want.err.Data, respb)) {
				t.Fatalf("%s: read %+v %+v, gjson %+v %+v", resp, got, got.err, want, want.err)
			}
		}
	})
}

// sameSlice reports whether a and b hold the same bytes (or are both
// nil), at the same place when b is a slice of msg (gjson copies some of
// what it returns).
func sameSlice(a, b, msg []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) && (a == nil) == (b == nil)
	}
	in := func(x []byte) bool {
		p, m := uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(unsafe.SliceData(msg)))
		return p >= m && p < m+uintptr(len(msg))
	}
	return bytes.Equal(a, b) && (!in(b) || &a[0] == &b[0])
}
