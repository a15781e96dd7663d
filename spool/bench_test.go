package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// echoSteps returns n steps as capture builds them for a tools/call echo of
// 256 bytes of text: the arguments and result are slices of the request
// and response, as BuildStep takes them.
func echoSteps(n int) []hindsight.Step {
	text := strings.Repeat("abcdefgh", 32)
	out := make([]hindsight.Step, n)
	now := time.Now()
	for i := range out {
		req := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, i, text))
		resp := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`, i, text))
		a := strings.Index(string(req), `{"text"`)
		r := strings.Index(string(resp), `{"content"`)
		out[i] = hindsight.Step{SessionID: "s1", Server: "echo", Transport: "stdio", Direction: hindsight.ClientToServer,
			Method: "tools/call", Tool: "echo", StartedAt: now, EndedAt: now.Add(80 * time.Microsecond), LatencyMS: 0.08,
			Request: req, Response: resp, Arguments: req[a : len(req)-2 : len(req)-2], Result: resp[r : len(resp)-1 : len(resp)-1],
			CausalTag: hindsight.TagSuccess, ClientName: "bench", ClientVersion: "1.0", ProtocolVersion: "2025-06-18"}
	}
	return out
}

// ackSink acknowledges every batch at once, taking the encodings as stored.
type ackSink struct{}

func (ackSink) Deliver(context.Context, []hindsight.Step) error     { return nil }
func (ackSink) DeliverRaw(context.Context, []json.RawMessage) error { return nil }

// BenchmarkAppend measures a step's way through the outbox as the
// Recorder's committer hands it over in batches of 64: numbered, encoded,
// journaled and delivered to a daemon that acknowledges at once. The
// figures are per step; cpu-ns/op counts every goroutine of the outbox.
func BenchmarkAppend(b *testing.B) {
	const batch = 64
	o, err := Open(Options{Home: hindsight.Home(b.TempDir()), Logger: slog.New(slog.DiscardHandler), Deliverer: ackSink{}})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close(context.Background())
	tmpl := echoSteps(batch)
	steps := make([]hindsight.Step, batch)
	b.ReportAllocs()
	cpu := testkit.ProcessCPU()
	n := 0
	for b.Loop() {
		if n%batch == 0 {
			copy(steps, tmpl)
			o.WaitRoom()
			o.Append(steps)
		}
		n++
	}
	b.ReportMetric(float64(testkit.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkAppendJournaled measures a step journaled one at a time, as
// the relay hands over an answered call when calls come one by one:
// AppendJournaled then Signal, the daemon acknowledging at once. The
// write variant is the write(2) journal every platform has; mapped is the
// file mapping (Linux), measured in the same run.
func BenchmarkAppendJournaled(b *testing.B) {
	for _, mapped := range []bool{false, true} {
		name := "write"
		if mapped {
			name = "mapped"
		}
		b.Run(name, func(b *testing.B) {
			if mapped && !canMap {
				b.Skip("no mapped journal on this platform")
			}
			defer func(was bool) { mapJournal = was }(mapJournal)
			mapJournal = mapped
			o, err := Open(Options{Home: hindsight.Home(b.TempDir()), Logger: slog.New(slog.DiscardHandler), Deliverer: ackSink{}})
			if err != nil {
				b.Fatal(err)
			}
			defer o.Close(context.Background())
			tmpl := echoSteps(1)
			steps := make([]hindsight.Step, 1)
			b.ReportAllocs()
			cpu := testkit.ProcessCPU()
			for b.Loop() {
				copy(steps, tmpl)
				o.AppendJournaled(steps)
				o.Signal()
			}
			b.ReportMetric(float64(testkit.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
			if !o.Journaling() {
				b.Fatal("the journal was given up")
			}
		})
	}
}

// BenchmarkJournalWrite measures the journal alone: one step's record per
// write, as when calls come one at a time, the steps released (delivered)
// every release steps. write is the write(2) journal, mapped the file
// mapping (Linux), in the same run; ahead=0 is the mapped journal without
// segments made ahead (see preparer). Released every 4096, 11 segments are
// in flight, more than the spares: new ones are made. paced leaves 20 µs
// between steps (the relay's own work on a step, busy) and reports the
// time in write per step (the relay's path) as write-ns/op, and in
// release (delivery's, under the lock the relay takes) as release-ns/op.
func BenchmarkJournalWrite(b *testing.B) {
	raw := bytes.Repeat([]byte("x"), 700)
	type variant struct {
		mapped  bool
		release int
		ahead   int
		paced   bool
		name    string
	}
	var variants []variant
	for _, release := range []int{64, 4096} {
		variants = append(variants, variant{release: release, name: fmt.Sprintf("write/release=%d", release)})
	}
	variants = append(variants, variant{mapped: true, release: 64, ahead: 2, name: "mapped/release=64"})
	for _, paced := range []bool{false, true} {
		for _, ahead := range []int{0, 2} {
			name := fmt.Sprintf("mapped/release=4096/ahead=%d", ahead)
			if paced {
				name = fmt.Sprintf("mapped/release=4096/paced/ahead=%d", ahead)
			}
			variants = append(variants, variant{mapped: true, release: 4096, ahead: ahead, paced: paced, name: name})
		}
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			if v.mapped && !canMap {
				b.Skip("no mapped journal on this platform")
			}
			defer func(was bool, ahead int) { mapJournal, segmentsAhead = was, ahead }(mapJournal, segmentsAhead)
			mapJournal, segmentsAhead = v.mapped, v.ahead
			j := &journal{dir: b.TempDir()}
			defer j.close(true)
			batch := []entry{{raw: raw}}
			b.ReportAllocs()
			seq := uint64(0)
			var in, rel time.Duration
			for b.Loop() {
				seq++
				batch[0].seq = seq
				var t0 time.Time
				if v.paced {
					for t0 = time.Now(); time.Since(t0) < 20*time.Microsecond; {
					}
					t0 = time.Now()
				}
				if err := j.write(batch); err != nil {
					b.Fatal(err)
				}
				if v.paced {
					in += time.Since(t0)
				}
				if seq%uint64(v.release) == 0 {
					t1 := time.Now()
					j.release(seq + 1)
					rel += time.Since(t1)
				}
			}
			if v.paced {
				b.ReportMetric(float64(in.Nanoseconds())/float64(b.N), "write-ns/op")
				b.ReportMetric(float64(rel.Nanoseconds())/float64(b.N), "release-ns/op")
			}
		})
	}
}
