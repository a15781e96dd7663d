package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/traces"
	"github.com/hindsight-proxy/hindsight/wire"
)

// BenchmarkIngest measures the trace store's ingest (dedupe, segmentation,
// synchronous Badger commit) per batch of 256 steps, against a baseline in
// the same run: the same steps written to Badger as plain key/values in
// one transaction, with nothing else.
func BenchmarkIngest(b *testing.B) {
	const batch = 256
	b.Run("store", func(b *testing.B) {
		st := openTestStore(b, b.TempDir(), tasktest.NewClock(tasktest.T0))
		defer st.Close()
		ctx := context.Background()
		seq := uint64(1)
		b.ReportAllocs()
		cpu0 := testkit.ProcessCPU()
		for b.Loop() {
			if _, err := st.Ingest(ctx, tasktest.Batch("bench", seq, batch)); err != nil {
				b.Fatal(err)
			}
			seq += batch
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "steps/s")
		reportCPU(b, cpu0, b.N*batch)
	})
	b.Run("badger-baseline", func(b *testing.B) {
		db, err := badger.Open(badgerdb.Options(b.TempDir(), quiet))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		defer badgerdb.StartCompactor(db, quiet).Stop() // the daemon's options run none of Badger's
		seq := uint64(1)
		b.ReportAllocs()
		cpu0 := testkit.ProcessCPU()
		for b.Loop() {
			steps := tasktest.Batch("bench", seq, batch)
			err := db.Update(func(txn *badger.Txn) error {
				for i := range steps {
					v, err := json.Marshal(&steps[i])
					if err != nil {
						return err
					}
					if err := txn.Set([]byte(fmt.Sprintf("step/%020d", steps[i].Seq)), v); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			seq += batch
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "steps/s")
		reportCPU(b, cpu0, b.N*batch)
	})
}

// BenchmarkIngestHTTP measures what the daemon spends on a delivered batch
// of steps, as a sidecar's outbox sends it (POST /v1/steps with the steps'
// JSON; steps of relaybench's echo call, about 1.6 KB each): decoding,
// the disk space guard, ingest and the commit; batches of 256 (an outbox
// catching up), of 128, 64 and 16 (an agent calling tools back to back:
// the outbox lingers 10 ms for a batch) and of 1 (an agent calling a tool
// now and then: the cost of a batch). The bodies are encoded ahead, a
// stock at a time, and the CPU time spent encoding them is not counted.
func BenchmarkIngestHTTP(b *testing.B) {
	benchIngest(b, "/v1/steps", []int{256, 128, 64, 16, 1}, benchBodies)
}

// BenchmarkIngestCompact is BenchmarkIngestHTTP for what a sidecar sends
// today: POST /v1/steps/compact with the steps in their compact encoding
// (wire.AppendCompactStep), into a real Badger on disk; batches
// of 64 (relaybench's 64 calls in flight) and of 1.
func BenchmarkIngestCompact(b *testing.B) {
	benchIngest(b, "/v1/steps/compact", []int{64, 1}, compactBodies)
}

// benchIngest posts batches of steps to path, with the bodies encoded
// ahead by bodies (a stock at a time, its CPU time not counted).
func benchIngest(b *testing.B, path string, batches []int, bodiesOf func(*testing.B, uint64, int, int) [][]byte) {
	for _, batch := range batches {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			dir := b.TempDir()
			st := openTestStore(b, filepath.Join(dir, "traces"), tasktest.NewClock(tasktest.T0))
			defer st.Close()
			srv := &Server{Traces: st, Logger: quiet, Space: &SpaceGuard{Dir: dir, Logger: quiet}}
			seq := uint64(1)
			var bodies [][]byte
			var encoding time.Duration // CPU time spent encoding bodies
			b.ReportAllocs()
			cpu0 := testkit.ProcessCPU()
			for b.Loop() {
				if len(bodies) == 0 {
					b.StopTimer()
					c0 := testkit.ProcessCPU()
					bodies = bodiesOf(b, seq, batch, max(1, 4096/batch))
					encoding += testkit.ProcessCPU() - c0
					b.StartTimer()
				}
				req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(bodies[0]))
				bodies = bodies[1:]
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
				seq += uint64(batch)
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "steps/s")
			reportCPU(b, cpu0+encoding, b.N*batch)
		})
	}
}

// compactBodies is benchBodies with the steps in their compact encoding.
func compactBodies(b *testing.B, seq uint64, batch, n int) [][]byte {
	return encodeBodies(b, seq, batch, n, wire.AppendCompactStep)
}

// echoBatch is a batch of n steps of relaybench's call (bench.EchoTool
// with 256 bytes of text) as a sidecar records them, from one sidecar,
// starting at seq.
func echoBatch(source string, seq uint64, n int) []hindsight.Step {
	text := strings.Repeat("hindsight ", 26)[:256]
	args := `{"text":"` + text + `"}`
	result := `{"content":[{"type":"text","text":"` + text + `"}]}`
	out := make([]hindsight.Step, n)
	for i := range out {
		id := strconv.FormatUint(seq+uint64(i), 10)
		s := tasktest.Stdio(tasktest.Step(source, seq+uint64(i), time.Duration(seq+uint64(i))*time.Millisecond), "s1", 100)
		s.Server, s.Tool, s.LatencyMS = "echo", "echo", 0.061
		s.Arguments, s.Result = json.RawMessage(args), json.RawMessage(result)
		s.Request = json.RawMessage(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":` + args + `}}`)
		s.Response = json.RawMessage(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`)
		s.ClientName, s.ClientVersion, s.ProtocolVersion = "relaybench", "1.0", "2025-06-18"
		out[i] = s
	}
	return out
}

// benchBodies encodes n bodies of POST /v1/steps, each of batch steps of
// echoBatch, with consecutive seqs from seq.
func benchBodies(b *testing.B, seq uint64, batch, n int) [][]byte {
	return encodeBodies(b, seq, batch, n, wire.AppendStep)
}

// encodeBodies is benchBodies with each step encoded by enc.
func encodeBodies(b *testing.B, seq uint64, batch, n int, enc func([]byte, *hindsight.Step) ([]byte, error)) [][]byte {
	out := make([][]byte, n)
	for j := range out {
		out[j] = tasktest.BatchJSON(b, echoBatch("bench", seq, batch), enc)
		seq += uint64(batch)
	}
	return out
}

// BenchmarkScanStepBatch measures wire.DecodeBatch's fast path decoding a
// batch of 64 steps (what ingest reads of each, and the check that the
// rest decodes).
func BenchmarkScanStepBatch(b *testing.B) {
	benchScan(b, benchBodies(b, 1, scanBatch, 1)[0])
}

// BenchmarkScanCompactBatch is BenchmarkScanStepBatch for a batch of
// compact steps, what a sidecar sends.
func BenchmarkScanCompactBatch(b *testing.B) {
	benchScan(b, compactBodies(b, 1, scanBatch, 1)[0])
}

// scanBatch is the number of steps in the scan benchmarks' batch.
const scanBatch = 64

func benchScan(b *testing.B, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if steps, err := traces.DecodeBatch(body); err != nil || steps.Len() != scanBatch {
			b.Fatalf("scan: %d steps, %v", steps.Len(), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*scanBatch), "ns/step")
}

// reportCPU reports the process's CPU time since cpu0 per step.
func reportCPU(b *testing.B, cpu0 time.Duration, steps int) {
	b.ReportMetric(float64(testkit.ProcessCPU()-cpu0)/float64(steps), "cpu-ns/step")
}

// BenchmarkTaskRead measures reading a task of 256 steps back (what
// reflection and `traces show` do).
func BenchmarkTaskRead(b *testing.B) {
	const steps = 256
	st := openTestStore(b, b.TempDir(), tasktest.NewClock(tasktest.T0))
	defer st.Close()
	ctx := context.Background()
	if _, err := st.Ingest(ctx, tasktest.Batch("bench", 1, steps)); err != nil {
		b.Fatal(err)
	}
	tasks, err := st.Tasks(ctx, TaskFilter{})
	if err != nil || len(tasks) != 1 {
		b.Fatalf("tasks: %v, %v", tasks, err)
	}
	b.ReportAllocs()
	cpu0 := testkit.ProcessCPU()
	for b.Loop() {
		task, err := st.Task(ctx, tasks[0].ID)
		if err != nil || len(task.Steps) != steps {
			b.Fatalf("task: %v", err)
		}
	}
	reportCPU(b, cpu0, b.N*steps)
}

// BenchmarkSpaceGuardCheck measures SpaceGuard.Check under ingest: each
// call checks a batch of 64 steps of about 1.2 KB each (what it is asked
// for, twice the batch's size) after the batch was written to the value
// log of a database, a sparse file of Badger's size written from its
// start, rotated to a new file once full, as Badger's are (the full one
// is removed: the benchmark would fill the disk). check-cpu-ns/op is the
// CPU time spent in Check alone.
func BenchmarkSpaceGuardCheck(b *testing.B) {
	const (
		batch    = 64 * 1200
		fileSize = 128 << 20 // Badger's value log files: twice WithValueLogFileSize
		rotateAt = 64 << 20
	)
	dir := b.TempDir()
	db := filepath.Join(dir, "traces")
	if err := os.Mkdir(db, 0o700); err != nil {
		b.Fatal(err)
	}
	var (
		f   *os.File
		fid int
		pos int64
	)
	rotate := func() {
		if f != nil { // the full log goes, as Badger's value log GC has it go
			f.Close()
			if err := os.Remove(f.Name()); err != nil {
				b.Fatal(err)
			}
		}
		fid++
		var err error
		f, err = os.OpenFile(filepath.Join(db, fmt.Sprintf("%06d.vlog", fid)), os.O_RDWR|os.O_CREATE, 0o600)
		if err == nil {
			err = f.Truncate(fileSize)
		}
		if err != nil {
			b.Fatal(err)
		}
		pos = 0
	}
	rotate()
	defer func() { f.Close() }()
	g := &SpaceGuard{Dir: dir, Logger: quiet}
	data := bytes.Repeat([]byte("hindsight "), batch/10)
	var inCheck time.Duration
	b.ReportAllocs()
	for b.Loop() {
		if pos+batch > rotateAt {
			rotate()
		}
		if _, err := f.WriteAt(data, pos); err != nil {
			b.Fatal(err)
		}
		pos += batch
		cpu0 := testkit.ProcessCPU()
		if err := g.Check(2 * batch); err != nil {
			b.Fatal(err)
		}
		inCheck += testkit.ProcessCPU() - cpu0
	}
	b.ReportMetric(float64(inCheck.Nanoseconds())/float64(b.N), "check-cpu-ns/op")
}
