package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/wire"
)

// TestCompactStepsRoundTrip: compact steps posted to the daemon, over both
// paths and through both decoders (the scanner and encoding/json's, which
// takes a batch whose keys the scanner refuses), read back whole: in the
// task, and in the export.
func TestCompactStepsRoundTrip(t *testing.T) {
	c := startServer(t, &Server{Queue: &recordingQueue{}})
	ctx := context.Background()
	var want []hindsight.Step
	var raws []json.RawMessage
	for i := range 4 {
		s := tasktest.CompactStep("ob-c", uint64(i), time.Duration(i)*time.Second)
		want = append(want, s)
		b, err := wire.AppendCompactStep(nil, &s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"derived":["arguments","result"]`)) {
			t.Fatalf("not compact: %s", b)
		}
		raws = append(raws, b)
	}
	if _, err := c.IngestRaw(ctx, raws[:2]); err != nil { // POST /v1/steps/compact
		t.Fatal(err)
	}
	// The same shape, with a key the scanner does not take (upper case):
	// encoding/json's path must derive the bodies too.
	slow := `{"steps":[` + string(raws[2]) + `,` + strings.Replace(string(raws[3]), `"server"`, `"Server"`, 1) + `]}`
	resp, err := c.do(ctx, http.MethodPost, "/steps", nil, strings.NewReader(slow), "application/json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	tasks, err := c.Tasks(ctx, TaskFilter{})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks %v, err %v", tasks, err)
	}
	task, err := c.Task(ctx, tasks[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(task.Steps), len(want))
	}
	for i, s := range task.Steps {
		if string(s.Arguments) != string(want[i].Arguments) || string(s.Result) != string(want[i].Result) {
			t.Errorf("step %d: arguments %s result %s; want %s and %s", i, s.Arguments, s.Result, want[i].Arguments, want[i].Result)
		}
	}
	var export bytes.Buffer
	if err := c.Export(ctx, &export, task.ID); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(export.String(), `"arguments":{"path":"/tmp/a"},"result":{"content"`); n != len(want) {
		t.Errorf("export has the arguments %d times, want %d:\n%s", n, len(want), export.String())
	}
	if strings.Contains(export.String(), `"derived"`) {
		t.Errorf("export shows the compact encoding's member:\n%s", export.String())
	}
}

// TestCompactStepsRefused: a "derived" member that is not a list of known
// bodies is bad input.
func TestCompactStepsRefused(t *testing.T) {
	c := startServer(t, &Server{Queue: &recordingQueue{}})
	for _, d := range []string{`["request"]`, `"arguments"`, `[1]`, `["arguments",]`} {
		s := tasktest.CompactStep("ob-r", 0, 0)
		b, _ := wire.AppendStep(nil, &s)
		raw := append(b[:len(b)-1:len(b)-1], `,"derived":`+d+`}`...)
		_, err := c.IngestRaw(context.Background(), []json.RawMessage{raw})
		if !errors.Is(err, ErrRejected) {
			t.Errorf("derived %s: err %v, want rejected", d, err)
		}
	}
}

// TestClientOlderDaemon: a daemon that does not know compact steps answers
// 404 to their path; the client then sends them whole, and keeps doing so
// for a while without asking again.
func TestClientOlderDaemon(t *testing.T) {
	dir := testkit.ShortTempDir(t)
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var paths []string
	var bodies []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/v1/steps" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Write([]byte(`{"accepted":1}`))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	c := NewClient(sock)
	s := tasktest.CompactStep("ob-o", 0, 0)
	raw, _ := wire.AppendCompactStep(nil, &s)
	for range 2 {
		if _, err := c.IngestRaw(context.Background(), []json.RawMessage{raw}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/v1/steps/compact", "/v1/steps", "/v1/steps"}; strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("paths %v, want %v", paths, want)
	}
	whole, _ := wire.AppendStep(nil, &s)
	for _, b := range bodies {
		if b != `{"steps":[`+string(whole)+`]}` {
			t.Errorf("an older daemon got %s, want the whole step %s", b, whole)
		}
	}
}
