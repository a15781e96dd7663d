package capture

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/testkit"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// BenchmarkEchoSteps measures capture end to end on the traffic of the
// relay benchmark: a tools/call echo of 256 bytes of text, whose redaction
// is cheap, so that what the pipeline adds around it shows (building,
// ordering, tagging, encoding, journaling, delivering, and the garbage of
// each). The daemon acknowledges at once. Allocations are per step.
func BenchmarkEchoSteps(b *testing.B) {
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
	for b.Loop() {
		now := time.Now()
		r.Hook(&proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Method: "tools/call",
			Request: reqs[n%256], Response: resps[n%256], Started: now, Ended: now})
		if n++; n%256 == 0 {
			if err := r.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := r.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	reportCPU(b, cpu)
	if st := r.Stats(); st.Dropped != 0 {
		b.Fatalf("dropped %d", st.Dropped)
	}
}
