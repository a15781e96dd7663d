package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/traces"
)

// recordingQueue is a ReflectionQueue that remembers what it was given and
// "reflects" by counting.
type recordingQueue struct {
	mu       sync.Mutex
	enqueued []string
	fail     bool
}

func (q *recordingQueue) Enqueue(ctx context.Context, id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail {
		return errors.New("queue down")
	}
	q.enqueued = append(q.enqueued, id)
	return nil
}

func (q *recordingQueue) ids() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.enqueued)
}

func (q *recordingQueue) Stats(ctx context.Context) (QueueStats, error) {
	return QueueStats{Pending: len(q.ids())}, nil
}

func (q *recordingQueue) RunNow(ctx context.Context, ids []string, pending bool, progress func(done, total int)) error {
	all := ids
	if pending {
		all = append(all, q.ids()...)
	}
	for i := range all {
		progress(i+1, len(all))
	}
	if slices.Contains(ids, "boom") {
		return errors.New("reflector exploded")
	}
	return nil
}

// startServer serves s on a real Unix socket in a fresh home and returns a
// client for it.
func startServer(t *testing.T, s *Server) *Client {
	t.Helper()
	home := s.Home
	if home == "" {
		home = hindsight.Home(testkit.ShortTempDir(t))
		s.Home = home
	}
	if s.Logger == nil {
		s.Logger = quiet
	}
	if s.Redactor == nil { // as the command line gives it
		red, err := capture.NewRedactor(capture.RedactorConfig{})
		if err != nil {
			t.Fatal(err)
		}
		s.Redactor = red
	}
	if s.Traces == nil {
		st, err := traces.Open(filepath.Join(home.DaemonData(), "traces"), traces.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		s.Traces = st
	}
	lock, err := AcquireLock(home)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(home, lock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		lock.Release()
	})
	return NewClient(home.Socket())
}

func TestAPITraces(t *testing.T) {
	ctx := context.Background()
	q := &recordingQueue{}
	c := startServer(t, &Server{Queue: q, Tick: 20 * time.Millisecond})

	steps := []hindsight.Step{
		tasktest.Stdio(tasktest.Step("fs", 1, 0), "s1", 100),
		tasktest.Stdio(tasktest.Step("fs", 2, time.Second), "s1", 100),
	}
	steps[1].CausalTag, steps[1].IsError = hindsight.TagFailure, true
	if err := c.Deliver(ctx, steps); err != nil {
		t.Fatal(err)
	}
	res, err := c.Ingest(ctx, steps)
	if err != nil || res.Duplicates != 2 {
		t.Fatalf("redelivery = %+v, %v", res, err)
	}
	// A refused batch says so, and is recognisably permanent.
	if err := c.Deliver(ctx, []hindsight.Step{{Seq: 1}}); !errors.Is(err, ErrRejected) {
		t.Fatalf("bad batch: err = %v, want ErrRejected", err)
	}

	tasks, err := c.Tasks(ctx, TaskFilter{})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("Tasks = %+v, %v", tasks, err)
	}
	id := tasks[0].ID
	if tasks[0].StepCount != 2 || tasks[0].FailureCount != 1 || tasks[0].Final || len(tasks[0].Steps) != 0 {
		t.Fatalf("task = %+v", tasks[0])
	}
	task, err := c.Task(ctx, id)
	if err != nil || len(task.Steps) != 2 || task.Steps[1].StepIndex != 1 {
		t.Fatalf("Task = %+v, %v", task, err)
	}
	if _, err := c.Task(ctx, "no-such-task"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("Task(unknown) err = %v", err)
	}
	var buf bytes.Buffer
	if err := c.Export(ctx, &buf, id); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(buf.String()), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `"step_index":0`) {
		t.Fatalf("export:\n%s", buf.String())
	}
	if err := c.Export(ctx, &buf, "no-such-task"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("Export(unknown) err = %v", err)
	}

	// The session ends: the task is final and handed to reflection.
	final, err := c.CloseSession(ctx, "s1", "", nil)
	if err != nil || len(final) != 1 || final[0] != id {
		t.Fatalf("CloseSession = %v, %v", final, err)
	}
	// The queue takes the task, then the store records it as queued.
	testkit.WaitFor(t, "the condition", 10*time.Second, func() bool {
		task, _ = c.Task(ctx, id)
		return slices.Contains(q.ids(), id) && task != nil && task.Reflection != ""
	})
	if !task.Final || task.Reflection != "pending" {
		t.Fatalf("after close: final %v, reflection %q", task.Final, task.Reflection)
	}
	st, err := c.Status(ctx)
	if err != nil || !st.Running || st.Traces.FinalTasks != 1 || st.Reflection == nil || st.Reflection.Pending != 1 {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	resp, err := c.do(ctx, http.MethodGet, "/../metrics", nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"hindsight_daemon_steps_ingested_total 2", "hindsight_daemon_steps_duplicate_total 2", "hindsight_daemon_step_batches_total 2",
		"hindsight_daemon_batches_rejected_total 1", "hindsight_daemon_tasks_final_total 1"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

func TestAPIQueueDownKeepsFinalTasks(t *testing.T) {
	ctx := context.Background()
	q := &recordingQueue{fail: true}
	c := startServer(t, &Server{Queue: q, Tick: 20 * time.Millisecond})
	if err := c.Deliver(ctx, []hindsight.Step{tasktest.HTTP(tasktest.Step("web", 1, 0), "h1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CloseSession(ctx, "h1", "", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	st, _ := c.Status(ctx)
	if st.Traces.Unqueued != 1 {
		t.Fatalf("unqueued = %d, want 1 while the queue refuses", st.Traces.Unqueued)
	}
	q.mu.Lock()
	q.fail = false
	q.mu.Unlock()
	testkit.WaitFor(t, "the condition", 10*time.Second, func() bool { return len(q.ids()) == 1 })
}

func TestAPIReflect(t *testing.T) {
	ctx := context.Background()
	var progress []int
	c := startServer(t, &Server{Queue: &recordingQueue{}})
	err := c.Reflect(ctx, []string{"a", "b", "c"}, false, func(done, total int) {
		if total != 3 {
			t.Errorf("total = %d", total)
		}
		progress = append(progress, done)
	})
	if err != nil || !slices.Equal(progress, []int{1, 2, 3}) {
		t.Fatalf("Reflect = %v, progress %v", err, progress)
	}
	if err := c.Reflect(ctx, []string{"boom"}, false, nil); err == nil || !strings.Contains(err.Error(), "exploded") {
		t.Fatalf("Reflect(boom) = %v", err)
	}
	c2 := startServer(t, &Server{})
	if err := c2.Reflect(ctx, nil, true, nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Reflect without a queue = %v, want ErrUnavailable", err)
	}
}

func TestAPIExperiencesUnavailable(t *testing.T) {
	c := startServer(t, &Server{})
	_, err := c.Experiences(context.Background(), hindsight.ListOptions{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(ae.Message, "no experience store") {
		t.Fatalf("err = %v, want 503 saying there is no store", err)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v does not wrap ErrUnavailable", err)
	}
}

// TestAPIStoreNotOpenYet: over a store still being opened (a
// store.Pending), searches and reads answer 503 with an error the client
// tells apart as hindsight.ErrStoreUnavailable (ErrUnavailable alone is
// not), and status says the store is unavailable; once it opens, they are
// answered.
func TestAPIStoreNotOpenYet(t *testing.T) {
	ctx := context.Background()
	p := store.NewPending(embedder.NewLocal(0))
	c := startServer(t, &Server{Store: p, StoreName: "weaviate"})
	_, err := c.Search(ctx, hindsight.Query{Text: "upload", K: 3})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Fatalf("search over a store not open: %v, want 503 ErrStoreUnavailable", err)
	}
	if _, err := startServer(t, &Server{}).Experiences(ctx, hindsight.ListOptions{}); errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Fatalf("no store configured reads as ErrStoreUnavailable: %v", err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Experiences == nil || st.Experiences.Available || !strings.Contains(st.Experiences.Error, "store unavailable") {
		t.Fatalf("status over a store not open: %+v, %v", st.Experiences, err)
	}
	if !p.Set(openEmbedded(t)) {
		t.Fatal("Set refused before Close")
	}
	if _, err := c.Search(ctx, hindsight.Query{Text: "upload", K: 3}); err != nil {
		t.Fatalf("search once the store opened: %v", err)
	}
	if st, err := c.Status(ctx); err != nil || !st.Experiences.Available {
		t.Fatalf("status once the store opened: %+v, %v", st.Experiences, err)
	}
}

func openEmbedded(t *testing.T) hindsight.ExperienceStore {
	t.Helper()
	st, err := embedded.Open(t.TempDir(), embedder.NewLocal(0), embedded.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestAPIExperiences(t *testing.T) {
	ctx := context.Background()
	c := startServer(t, &Server{Store: openEmbedded(t), StoreName: "embedded"})
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	pack := tasktest.ExperienceLine("e1", "read_file", "Call read_file with an absolute path under /data; relative paths fail with ENOENT.", day) +
		tasktest.ExperienceLine("e2", "list_directory", "Call list_directory on /data before read_file to learn the file names.", day)

	res, err := c.Import(ctx, strings.NewReader(pack))
	if err != nil || res.Imported != 2 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	// Importing again skips; a copy changed after our import updates.
	res, err = c.Import(ctx, strings.NewReader(pack+tasktest.ExperienceLine("e1", "read_file", "Call read_file with an absolute path under /data.", time.Now().Add(time.Minute))))
	if err != nil || res.Imported != 0 || res.Skipped != 2 || res.Updated != 1 {
		t.Fatalf("re-import = %+v, %v", res, err)
	}
	// A malformed file imports nothing.
	if _, err := c.Import(ctx, strings.NewReader(tasktest.ExperienceLine("e3", "x", "Call x.", day)+"{not json\n")); !errors.Is(err, ErrRejected) {
		t.Fatalf("malformed import err = %v, want 400", err)
	}
	if _, err := c.Experience(ctx, "", "e3"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("e3 imported from a malformed file: %v", err)
	}

	found, err := c.Search(ctx, hindsight.Query{Text: "read_file ENOENT relative path", Tool: "read_file", K: 3})
	if err != nil || len(found) == 0 || found[0].ID != "e1" || found[0].Score <= 0 {
		t.Fatalf("Search = %+v, %v", found, err)
	}
	e, _ := c.Experience(ctx, "", "e1")
	if e.HitCount != 1 || e.LastHitAt == nil {
		t.Fatalf("search did not record a hit: %+v", e)
	}
	if _, err := c.Search(ctx, hindsight.Query{Text: "read_file", NoHit: true}); err != nil {
		t.Fatal(err)
	}
	if e, _ := c.Experience(ctx, "default", "e1"); e.HitCount != 1 {
		t.Fatalf("a NoHit search counted: hit count %d", e.HitCount)
	}

	if e, err := c.Forget(ctx, "", "e2"); err != nil || !e.Deleted {
		t.Fatalf("Forget = %+v, %v", e, err)
	}
	list, _ := c.Experiences(ctx, hindsight.ListOptions{})
	if len(list) != 1 || list[0].ID != "e1" {
		t.Fatalf("list after forget = %+v", list)
	}
	all, _ := c.Experiences(ctx, hindsight.ListOptions{IncludeDeleted: true})
	if len(all) != 2 {
		t.Fatalf("list with deleted = %d experiences", len(all))
	}
	if e, err := c.Restore(ctx, "", "e2"); err != nil || e.Deleted {
		t.Fatalf("Restore = %+v, %v", e, err)
	}
	if _, err := c.Forget(ctx, "", "nope"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("Forget(nope) = %v", err)
	}

	var buf bytes.Buffer
	if err := c.ExportExperiences(ctx, &buf, hindsight.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	n := 0
	for sc.Scan() {
		var e hindsight.Experience
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Lesson == "" {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("exported %d experiences, want 2", n)
	}
	st, _ := c.Status(ctx)
	if st.Experiences == nil || !st.Experiences.Available || st.Experiences.Active != 2 {
		t.Fatalf("status experiences = %+v", st.Experiences)
	}
}

// TestStepsBodyLengthLies: a step batch whose Content-Length is shorter
// than its body (the body is cut there), longer than it (the sender
// closes early), or past the body limit (no buffer of that size is made)
// is refused as bad input, and nothing of it is stored; a truthful one
// after them on a new connection is stored.
func TestStepsBodyLengthLies(t *testing.T) {
	st := openTestStore(t, t.TempDir(), tasktest.NewClock(tasktest.T0))
	defer st.Close()
	c := startServer(t, &Server{Traces: st})
	body, err := json.Marshal(StepBatch{Steps: []hindsight.Step{tasktest.Stdio(tasktest.Step("fs", 1, 0), "s1", 100), tasktest.Stdio(tasktest.Step("fs", 2, time.Second), "s1", 100)}})
	if err != nil {
		t.Fatal(err)
	}
	// post sends body with a Content-Length of length. A body shorter than
	// its length is followed by the end of the client's writing, so that
	// the server sees it end; a truthful one is not, since the server
	// cancels a request whose client closed its side (net/http's
	// background read), and the answer would be a race.
	post := func(length int64, body []byte) string {
		t.Helper()
		conn, err := net.Dial("unix", c.Socket())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/steps HTTP/1.1\r\nHost: hindsight\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", length)
		conn.Write(body)
		if length != int64(len(body)) {
			conn.(*net.UnixConn).CloseWrite()
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return "no answer: " + err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	for _, c := range []struct {
		name   string
		length int64
		want   string // the error's start
	}{
		{"shorter", int64(len(body) - 10), "bad request: decode body: "},
		{"longer", int64(len(body) + 1000), "bad request: read body: "},
		{"past the limit", maxBody + 1, "bad request: read body: "},
		{"far past the limit", 1 << 40, "bad request: read body: "},
	} {
		if got := post(c.length, body); !strings.HasPrefix(got, `400 {"error":"`+c.want) {
			t.Errorf("%s Content-Length: %s; want 400 %s…", c.name, got, c.want)
		}
		if n := storedSteps(t, st); n != 0 {
			t.Fatalf("%s Content-Length: %d steps stored", c.name, n)
		}
	}
	if got := post(int64(len(body)), body); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("truthful Content-Length: %s", got)
	}
	if n := storedSteps(t, st); n != 2 {
		t.Fatalf("%d steps stored; want 2", n)
	}
}
