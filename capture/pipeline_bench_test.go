package capture

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// BenchmarkEchoSteps measures capture end to end on the traffic of the
// relay benchmark: a tools/call echo of 256 bytes of text, whose redaction
// is cheap, so that what the pipeline adds around it shows (building,
// ordering, tagging, encoding, journaling, delivering, and the garbage of
// each). The daemon acknowledges at once. Allocations are per step.
//
// "hook" hands every exchange to Hook (the queue: HTTP sidecars, and what
// Record leaves); "record/burst=N" has Record journal bursts of N exchanges
// before Hook sees them, as a stdio sidecar does (N=1: calls one at a time;
// N=8: calls in flight answered together). Compare them within one run.
func BenchmarkEchoSteps(b *testing.B) {
	b.Run("hook", func(b *testing.B) { echoSteps(b, 0) })
	b.Run("record/burst=1", func(b *testing.B) { echoSteps(b, 1) })
	b.Run("record/burst=8", func(b *testing.B) { echoSteps(b, 8) })
}

// echoSteps runs BenchmarkEchoSteps, with Record on bursts of burst
// exchanges unless burst is 0.
func echoSteps(b *testing.B, burst int) {
	red := defaultRedactor(b)
	text := strings.Repeat("abcdefgh", 32)
	sess := &proxy.Session{ID: "b", Server: "echo", Transport: "stdio"}
	reqs, resps := make([][]byte, 256), make([][]byte, 256)
	for i := range reqs {
		reqs[i] = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, i, text)
		resps[i] = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`, i, text)
	}
	r, err := New(Options{Home: hindsight.Home(b.TempDir()), Redactor: red, Logger: slog.New(slog.DiscardHandler),
		Deliverer: rawSink{}, MaxQueueBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(context.Background())
	b.ReportAllocs()
	cpu := testkit.ProcessCPU()
	n := 0
	var pending []*proxy.Exchange
	for b.Loop() {
		now := time.Now()
		ex := &proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Method: "tools/call",
			Request: reqs[n%256], Response: resps[n%256], Started: now, Ended: now}
		if burst == 0 {
			r.Hook(ex)
		} else if pending = append(pending, ex); len(pending) == burst {
			r.Record(pending)
			for _, ex := range pending {
				r.Hook(ex)
			}
			pending = pending[:0]
		}
		if n++; n%256 == 0 {
			if err := r.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	r.Record(pending)
	for _, ex := range pending {
		r.Hook(ex)
	}
	if err := r.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	reportCPU(b, cpu)
	if st := r.Stats(); st.Dropped != 0 {
		b.Fatalf("dropped %d", st.Dropped)
	}
}
