package capture

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/hindsight-proxy/hindsight/wire"
)

// typicalPayloads are tools/call traffic of the sizes agents produce: a
// small call, a file read, and a large search result.
func typicalPayloads() map[string][]byte {
	var lines []string
	for i := 0; i < 200; i++ {
		lines = append(lines, fmt.Sprintf("src/pkg%d/file%d.go:%d: func Handle%d(ctx context.Context, req *Request) error { return nil }", i%7, i, i*3, i))
	}
	big := strings.Join(lines, "\n")
	// relay-call and relay-result are relaybench's echo exchange: a
	// tools/call with 256 bytes of plain text, and its result holding the
	// arguments as JSON text.
	text := strings.Repeat("hindsight ", 26)[:256]
	args := `{"text":"` + text + `"}`
	return map[string][]byte{
		"relay-call":   []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"arguments":` + args + `,"name":"echo"}}`),
		"relay-result": []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":` + quote(args) + `}]}}`),
		"call-small":   []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/work/project/README.md"},"_meta":{"progressToken":7}}}`),
		"result-4k":    []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":` + quote(big[:4000]) + `}],"isError":false}}`),
		"result-20k":   []byte(`{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":` + quote(big) + `}],"structuredContent":{"matches":200,"truncated":false}}}`),
	}
}

// defaultRedactor is the redactor a sidecar runs with no user rules.
func defaultRedactor(b *testing.B) *Redactor {
	r, err := NewRedactor(RedactorConfig{})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func quote(s string) string { return string(wire.AppendPlainString(nil, s)) }

// BenchmarkRedact measures the redactor on typical payloads against a
// baseline in the same run: json.Valid over the same bytes (the least any
// JSON-aware pass must do).
func BenchmarkRedact(b *testing.B) {
	r := defaultRedactor(b)
	for name, p := range typicalPayloads() {
		b.Run(name+"/redact", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			cpu := testkit.ProcessCPU()
			for b.Loop() {
				r.Redact(p)
			}
			reportCPU(b, cpu)
		})
		b.Run(name+"/gitleaks-only", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			cpu := testkit.ProcessCPU()
			for b.Loop() {
				r.detector().detect(string(p))
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkRecorder measures capture with redaction on, on real Badger:
//
//   - hook: the cost Hook adds to the relay's path (queueing only);
//   - steps: exchanges recorded end to end (redacted, tagged, stored),
//     reported as steps/s, against redact-only: BuildStep alone on the
//     same exchanges, the CPU floor of the pipeline;
//   - commit-latency: one exchange in flight, Hook until durable (in the
//     journal) with Sync, which skips the hand-off linger, with p50/p99.
func BenchmarkRecorder(b *testing.B) {
	red := defaultRedactor(b)
	p := typicalPayloads()
	req := p["call-small"]
	resp := p["result-4k"]
	sess := &proxy.Session{ID: "b", Server: "fs", Transport: "stdio"}
	mk := func() *proxy.Exchange {
		now := time.Now()
		return &proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Method: "tools/call",
			Request: req, Response: resp, Started: now, Ended: now}
	}
	open := func(b *testing.B, d spool.Deliverer) *Recorder {
		r, err := New(Options{Home: hindsight.Home(b.TempDir()), Redactor: red, Logger: slog.New(slog.DiscardHandler),
			Deliverer: d, MaxQueueBytes: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close(context.Background()) })
		return r
	}
	b.Run("redact-only", func(b *testing.B) {
		b.ReportAllocs()
		t0, cpu := time.Now(), testkit.ProcessCPU()
		for b.Loop() {
			BuildStep(mk(), red, 0)
		}
		reportCPU(b, cpu)
		b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "steps/s")
	})
	// redact-only-relay: BuildStep on relaybench's echo exchange.
	b.Run("redact-only-relay", func(b *testing.B) {
		b.ReportAllocs()
		ex := &proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Method: "tools/call",
			Request: p["relay-call"], Response: p["relay-result"], Started: time.Now(), Ended: time.Now()}
		cpu := testkit.ProcessCPU()
		for b.Loop() {
			BuildStep(ex, red, 0)
		}
		reportCPU(b, cpu)
	})
	// build-encode: BuildStep and the encoding the outbox stores and
	// delivers, with nothing queued, handed over or written.
	b.Run("build-encode", func(b *testing.B) {
		b.ReportAllocs()
		cpu := testkit.ProcessCPU()
		var buf []byte
		for b.Loop() {
			st := BuildStep(mk(), red, 0)
			var err error
			if buf, err = wire.AppendCompactStep(buf[:0], &st); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
	})
	steps := func(b *testing.B, d spool.Deliverer) {
		r := open(b, d)
		b.ReportAllocs()
		t0, cpu := time.Now(), testkit.ProcessCPU()
		n := 0
		for b.Loop() {
			r.Hook(mk())
			// A flood faster than capture overruns the bounded queue, which
			// drops by design; wait for it every so often, so this measures
			// the steady rate at which steps reach disk.
			if n++; n%256 == 0 {
				if err := r.Sync(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		}
		// The queue is drained inside the measured time.
		if err := r.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		reportCPU(b, cpu)
		b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "steps/s")
		st := r.Stats()
		if st.Dropped != 0 {
			b.Fatalf("dropped %d", st.Dropped)
		}
		b.ReportMetric(float64(st.Spilled)/float64(b.N), "on-disk/op")
	}
	// steps: a daemon that acknowledges at once, as the daemon client
	// does (it sends the encodings as they are); steps-nodaemon: none, so
	// every step is written to disk.
	b.Run("steps", func(b *testing.B) { steps(b, rawSink{}) })
	b.Run("steps-nodaemon", func(b *testing.B) { steps(b, nil) })
	// steps-slowdaemon: a daemon that takes longer than PersistAfter to
	// acknowledge, so that every step is written to disk and removed.
	b.Run("steps-slowdaemon", func(b *testing.B) { steps(b, rawSink{delay: 2 * spool.DefaultPersistAfter}) })
	b.Run("hook", func(b *testing.B) {
		r := open(b, rawSink{})
		b.ReportAllocs()
		for b.Loop() {
			r.Hook(mk())
		}
		b.StopTimer()
		r.Sync(context.Background())
	})
	b.Run("commit-latency", func(b *testing.B) {
		r := open(b, rawSink{})
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			r.Hook(mk())
			r.Sync(context.Background())
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	})
}

// rawSink is a RawDeliverer that acknowledges every batch at once without
// looking at it: the daemon client's share of the sidecar's work is
// writing the encodings to a socket.
type rawSink struct{ delay time.Duration }

func (d rawSink) Deliver(context.Context, []hindsight.Step) error {
	time.Sleep(d.delay)
	return nil
}

func (d rawSink) DeliverRaw(context.Context, []json.RawMessage) error {
	time.Sleep(d.delay)
	return nil
}

// BenchmarkSpill measures an exchange's way through the spill: sealed,
// gathered and written in bursts of 64 (as the spill writer does when Hook
// outruns capture), read back and opened.
func BenchmarkSpill(b *testing.B) {
	p := typicalPayloads()
	sess := &proxy.Session{ID: "b", Server: "fs", Transport: "stdio"}
	ex := &proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Method: "tools/call",
		Request: p["call-small"], Response: p["result-4k"], Started: time.Now(), Ended: time.Now()}
	sp, err := openSpill(b.TempDir()+"/spill", 1<<30, make(chan struct{}, 1), slog.New(slog.DiscardHandler), &counters{})
	if err != nil {
		b.Fatal(err)
	}
	defer sp.close()
	b.ReportAllocs()
	b.SetBytes(int64(len(ex.Request) + len(ex.Response)))
	cpu := testkit.ProcessCPU()
	for b.Loop() {
		for range 64 {
			if _, _, err := sp.put(ex); err != nil {
				b.Fatal(err)
			}
		}
		if _, _, err := sp.flush(); err != nil {
			b.Fatal(err)
		}
		for range 64 {
			if _, ok, err := sp.next(); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(64*b.N), "ns/exchange")
}

// reportCPU reports the process's CPU time per op since start, the figure
// that stays put on a loaded machine where ns/op does not.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(testkit.ProcessCPU()-start)/float64(b.N), "cpu-ns/op")
}
