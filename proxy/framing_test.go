package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

func TestLineReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []string // "!N" stands for a LineTooLongError of N bytes
	}{
		{"lines", "a\nbb\n", 10, []string{"a", "bb"}},
		{"crlf kept for Parse to trim", "a\r\nb\n", 10, []string{"a\r", "b"}},
		{"last line without newline", "a\nb", 10, []string{"a", "b"}},
		{"empty lines", "\n\na\n", 10, []string{"", "", "a"}},
		{"exactly the limit", "abcd\n", 4, []string{"abcd"}},
		{"over the limit, then on", "abcde\nok\n", 4, []string{"!5", "ok"}},
		{"over the limit at EOF", "ok\nabcde", 4, []string{"ok", "!5"}},
		{"nothing", "", 4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readAllLines(t, NewLineReader(strings.NewReader(tt.in), tt.max))
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
		})
	}
}

func readAllLines(t *testing.T, lr *LineReader) []string {
	t.Helper()
	var got []string
	for {
		line, err := lr.ReadLine()
		var tooLong *LineTooLongError
		switch {
		case errors.As(err, &tooLong):
			got = append(got, "!"+strconv.FormatInt(tooLong.Size, 10))
			continue
		case errors.Is(err, io.EOF):
			return got
		case err != nil:
			t.Fatalf("ReadLine: %v", err)
		}
		got = append(got, string(line))
	}
}

// TestLineReaderLarge reads lines far beyond bufio's buffer, one byte at a
// time as well as at once, and drops one over the limit without losing the
// next.
func TestLineReaderLarge(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 30<<20/16) // 30 MiB
	over := bytes.Repeat([]byte("z"), 1<<20+1)
	var in bytes.Buffer
	in.Write(big)
	in.WriteByte('\n')
	in.Write(over)
	in.WriteByte('\n')
	in.WriteString(`{"after":true}` + "\n")
	lr := NewLineReader(iotest.HalfReader(bytes.NewReader(in.Bytes())), 31<<20)
	line, err := lr.ReadLine()
	if err != nil || !bytes.Equal(line, big) {
		t.Fatalf("30 MiB line: err %v, %d bytes, equal %v", err, len(line), bytes.Equal(line, big))
	}
	line, err = lr.ReadLine()
	if err != nil || len(line) != len(over) {
		t.Fatalf("second line: %v %d", err, len(line))
	}

	lr = NewLineReader(bytes.NewReader(in.Bytes()), 1<<20)
	var tooLong *LineTooLongError
	if _, err := lr.ReadLine(); !errors.As(err, &tooLong) || tooLong.Size != int64(len(big)) || tooLong.Limit != 1<<20 {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := lr.ReadLine(); !errors.As(err, &tooLong) || tooLong.Size != int64(len(over)) {
		t.Fatalf("just over the limit: %v", err)
	}
	if line, err := lr.ReadLine(); err != nil || string(line) != `{"after":true}` {
		t.Fatalf("line after the dropped ones: %q %v", line, err)
	}
	if NewLineReader(nil, 0).max != MaxLineBytes {
		t.Errorf("default limit is not MaxLineBytes")
	}
}

// TestLineReaderOwnsLines checks that a returned line survives later reads
// (some longer than the reader's buffer), and that appending to one never
// writes into another.
func TestLineReaderOwnsLines(t *testing.T) {
	var in strings.Builder
	var want []string
	const size = 200 << 10
	for i := 0; in.Len() < size; i++ {
		line := fmt.Sprintf("%d:%s", i, strings.Repeat("x", (i*3797)%(size/2)))
		want = append(want, line)
		in.WriteString(line + "\n")
	}
	lr := NewLineReader(strings.NewReader(in.String()), 0)
	var got [][]byte
	for {
		line, err := lr.ReadLine()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, line)
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for _, line := range got {
		_ = append(line, "clobber"...) // must not reach the next line
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Fatalf("line %d changed after later reads: %.40q, want %.40q", i, got[i], want[i])
		}
	}
}

// BenchmarkLineReader reads a burst of typical messages: one allocation
// each, the line the caller keeps.
func BenchmarkLineReader(b *testing.B) {
	var burst []byte
	for range 64 {
		burst = append(append(burst, benchRequest...), '\n')
	}
	b.SetBytes(int64(len(burst)))
	b.ReportAllocs()
	r := bytes.NewReader(burst)
	lr := NewLineReader(r, 0)
	for b.Loop() {
		r.Reset(burst)
		lr.r.Reset(r)
		for range 64 {
			if _, err := lr.ReadLine(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func TestLineWriterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	lw := NewLineWriter(&buf)
	msgs := []string{`{"a":1}`, strings.Repeat("b", 200<<10), `{"c":3}`}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if err := lw.WriteMessage([]byte(msgs[j%len(msgs)])); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	lines := readAllLines(t, NewLineReader(&buf, 0))
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, l := range lines {
		if l != msgs[0] && l != msgs[1] && l != msgs[2] {
			t.Fatalf("interleaved line of %d bytes", len(l))
		}
	}
}

// TestLineWriterFlushes checks that each message reaches the writer at
// once, whole, with its newline.
func TestLineWriterFlushes(t *testing.T) {
	var w recordWriter
	lw := NewLineWriter(&w)
	lw.WriteMessage([]byte(`{"x":1}`))
	if got := w.String(); got != "{\"x\":1}\n" {
		t.Fatalf("after one message the writer saw %q", got)
	}
	lw.WriteMessage(bytes.Repeat([]byte("y"), 100<<10))
	if w.Len() != 8+100<<10+1 {
		t.Fatalf("large message not flushed whole: %d bytes", w.Len())
	}
	broken := NewLineWriter(failWriter{})
	for range 2 {
		if err := broken.WriteMessage([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("write to a broken writer: %v, want %v", err, io.ErrClosedPipe)
		}
	}
}

type recordWriter struct{ bytes.Buffer }

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// FuzzFraming feeds arbitrary bytes through the stdio framing and Parse,
// and checks what the relay relies on: lines come back exactly as sent
// (when none is over the limit), Parse never panics and keeps the bytes,
// what it classifies as a message has the shape it claims, and the error
// responses the proxy builds from its id are valid JSON-RPC.
func FuzzFraming(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}` + "\r\n",
		`{"jsonrpc":"2.0","id":"x","result":{"content":[],"_meta":{"k":1}}}` + "\n" + `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		`{"id":5,"method":"a"}` + "\n" + `garbage` + "\n\n",
		`{"jsonrpc":"2.0","id":{"x":1},"method":"a"}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"error":{"code":-1,"message":"\u0000"}}`,
		"\xff\xfe{\"jsonrpc\":\"2.0\"}\n",
		strings.Repeat("a", 300) + "\n" + `{"jsonrpc":"2.0","id":9,"result":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 256
		lr := NewLineReader(bytes.NewReader(data), limit)
		var lines [][]byte
		dropped := false
		for {
			line, err := lr.ReadLine()
			var tooLong *LineTooLongError
			if errors.As(err, &tooLong) {
				if tooLong.Size <= limit {
					t.Fatalf("line of %d bytes reported over the limit %d", tooLong.Size, limit)
				}
				dropped = true
				continue
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(line) > limit || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("bad line %q", line)
			}
			lines = append(lines, line)
			checkParse(t, line)
		}
		if !dropped {
			joined := bytes.Join(lines, []byte("\n"))
			if want := bytes.TrimSuffix(data, []byte("\n")); !bytes.Equal(joined, want) {
				t.Fatalf("lines do not reassemble the input:\n got %q\nwant %q", joined, want)
			}
		}
		// Written back, the lines read the same.
		var buf bytes.Buffer
		lw := NewLineWriter(&buf)
		for _, l := range lines {
			lw.WriteMessage(l)
		}
		again := NewLineReader(&buf, limit)
		for i, l := range lines {
			got, err := again.ReadLine()
			if err != nil || !bytes.Equal(got, l) {
				t.Fatalf("line %d after a round trip: %q %v, want %q", i, got, err, l)
			}
		}
	})
}

func checkParse(t *testing.T, line []byte) {
	m, err := Parse(line)
	if !bytes.HasPrefix(line, m.Raw) || len(bytes.TrimRight(line[len(m.Raw):], "\r\n \t")) != 0 {
		t.Fatalf("Raw %q is not the line %q less trailing space", m.Raw, line)
	}
	if err != nil {
		if m.Kind != KindInvalid {
			t.Fatalf("error %v with kind %v", err, m.Kind)
		}
		if err == ErrParse && json.Valid(m.Raw) {
			t.Fatalf("valid JSON %q reported as a parse error", m.Raw)
		}
	} else if !json.Valid(m.Raw) {
		t.Fatalf("invalid JSON %q accepted", m.Raw)
	}
	switch m.Kind {
	case KindRequest, KindNotification:
		var probe struct {
			Method *string `json:"method"`
		}
		if json.Unmarshal(m.Raw, &probe) == nil && probe.Method != nil && m.Method != *probe.Method {
			// encoding/json keeps the last duplicate, Parse the first;
			// only a message without duplicates must agree.
			// Invalid UTF-8 is kept by Parse and replaced by encoding/json.
			if bytes.Count(m.Raw, []byte(`"method"`)) == 1 && utf8.Valid(m.Raw) {
				t.Fatalf("method %q, encoding/json says %q", m.Method, *probe.Method)
			}
		}
	}
	if err == nil && utf8.Valid(m.Raw) && bytes.IndexByte(m.Raw, '\\') < 0 {
		// The tool name and _meta noted while params is validated agree
		// with gjson's reading (escapes aside, where the two may differ
		// in how they repair invalid input).
		if params := gjson.GetBytes(m.Raw, "params"); params.IsObject() && m.params.ok() &&
			params.Raw == string(m.member(m.params)) {
			if got, want := m.paramString(m.name), params.Get("name").String(); got != want {
				t.Fatalf("%s: params name %q, gjson says %q", m.Raw, got, want)
			}
			if got, want := string(m.member(m.meta)), params.Get("_meta").Raw; got != want {
				t.Fatalf("%s: params _meta %q, gjson says %q", m.Raw, got, want)
			}
		}
	}
	if m.ID != nil {
		for _, resp := range [][]byte{ErrorResponse(m.ID, CodeInvalidRequest, string(line)), ResultResponse(m.ID, json.RawMessage(`{}`))} {
			if rm, err := Parse(resp); err != nil || rm.Kind != KindResponse || !bytes.Equal(rm.ID, m.ID) {
				t.Fatalf("response for id %s does not parse back: %s (%v)", m.ID, resp, err)
			}
		}
	}
}

func TestLineReaderPending(t *testing.T) {
	r, w := io.Pipe()
	lr := NewLineReader(r, 0)
	go w.Write([]byte("a\nb\n{\"part"))
	want := []struct {
		line    string
		pending bool
	}{{"a", true}, {"b", false}}
	for _, tt := range want {
		line, err := lr.ReadLine()
		if err != nil || string(line) != tt.line {
			t.Fatalf("ReadLine = %q, %v; want %q", line, err, tt.line)
		}
		if got := lr.Pending(); got != tt.pending {
			t.Fatalf("after %q: Pending = %v, want %v", tt.line, got, tt.pending)
		}
	}
	go func() { w.Write([]byte("ial\"}\n")); w.Close() }()
	if line, err := lr.ReadLine(); err != nil || string(line) != `{"partial"}` {
		t.Fatalf("ReadLine = %q, %v", line, err)
	}
	if lr.Pending() {
		t.Fatal("Pending at EOF")
	}
}
