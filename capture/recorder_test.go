package capture

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/prometheus/client_golang/prometheus"
)

// exchanges returns n tools/call exchanges of one session.
func exchanges(n int) []*proxy.Exchange {
	sess := &proxy.Session{ID: "s1", Server: "fs", Transport: "stdio", HostPID: 99}
	base := spooltest.Base
	var out []*proxy.Exchange
	for i := range n {
		req := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/p/` + strconv.Itoa(i) + `","token":"tk-` + strconv.Itoa(i) + `-secret"}}}`
		resp := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":{"content":[{"type":"text","text":"line ` + strconv.Itoa(i) + `"}]}}`
		out = append(out, &proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Method: "tools/call",
			Request: []byte(req), Response: []byte(resp),
			Started: base.Add(time.Duration(i) * time.Second), Ended: base.Add(time.Duration(i)*time.Second + 1500*time.Microsecond)})
	}
	return out
}

func TestRecorderDeliversInOrder(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{}
	reg := prometheus.NewRegistry()
	r, err := New(Options{Home: home, Server: "fs", Redactor: testRedactor(t), Deliverer: d, Logger: slog.New(slog.DiscardHandler), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges(500) {
		r.Hook(ex)
	}
	testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return r.Stats().Delivered == 500 })
	st := r.Stats()
	if st.Captured != 500 || st.Delivered != 500 || st.Redactions != 500 || st.Dropped != 0 || st.Depth != 0 {
		t.Errorf("stats %+v", st)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) < 10 {
		t.Errorf("metrics: %d families, %v", len(mfs), err)
	}
	dir := r.outbox.Dir()
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	spooltest.CheckInOrder(t, d.Got(), 500, r.Source())
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("emptied outbox not removed: %v", err)
	}
	r.Hook(exchanges(1)[0]) // after Close: counted, not recorded
	if r.Stats().Dropped != 1 {
		t.Errorf("hook after close not counted")
	}
}

// TestOutboxOutage: the daemon is down for a while; steps wait in the
// outbox and arrive exactly once, in order, with their timestamps.
func TestOutboxOutage(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{}
	d.SetDown(true)
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	exs := exchanges(300)
	for _, ex := range exs[:200] {
		r.Hook(ex)
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "failed attempts", 20*time.Second, func() bool { return r.Stats().DeliveryFailures >= 2 })
	for _, ex := range exs[200:] {
		r.Hook(ex)
	}
	r.Sync(context.Background())
	if st := r.Stats(); st.Depth != 300 || st.Spilled == 0 {
		t.Errorf("during outage: %+v", st)
	}
	d.SetDown(false)
	testkit.WaitFor(t, "delivery after outage", 20*time.Second, func() bool { return r.Stats().Delivered == 300 })
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	spooltest.CheckInOrder(t, d.Got(), 300, r.Source())
}

// TestOutboxRejected: a step the daemon refuses is set aside; the others
// are delivered, in order, and the refused one is kept in a file.
func TestOutboxRejected(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{Refuse: spooltest.Reject(spool.ErrRejected, func(s hindsight.Step) bool { return s.Seq == 7 })}
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges(20) {
		r.Hook(ex)
	}
	testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return r.Stats().Delivered == 19 && r.Stats().Rejected == 1 })
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, s := range d.Got() {
		want := uint64(i + 1)
		if want >= 7 {
			want++
		}
		if s.Seq != want {
			t.Fatalf("delivered seq %d at %d, want %d", s.Seq, i, want)
		}
		// Stored compact, delivered whole.
		if !strings.HasPrefix(string(s.Arguments), `{"path":"/p/`) || !strings.HasPrefix(string(s.Result), `{"content":`) {
			t.Fatalf("step %d delivered without its bodies: arguments %s, result %s", s.Seq, s.Arguments, s.Result)
		}
	}
	if st := r.Stats(); st.Rejected != 1 {
		t.Errorf("rejected %d", st.Rejected)
	}
	b, err := os.ReadFile(spool.RejectedPath(home, r.Source()))
	if err != nil || !strings.Contains(string(b), `"seq":7`) || !strings.Contains(string(b), `"arguments":{"path":"/p/6"`) || strings.Contains(string(b), `"derived"`) {
		t.Errorf("refused step not kept whole: %v %s", err, b)
	}
}

// TestSecretsNeverReachDisk records the whole corpus with no daemon, so
// every step stays in Badger, then scans every file under the home
// (value logs, tables, WAL) for each planted secret.
func TestSecretsNeverReachDisk(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sess := &proxy.Session{ID: "s", Server: "x", Transport: "stdio"}
	cases := loadCorpus(t)
	for _, c := range cases {
		ex := &proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Started: time.Now(), Ended: time.Now()}
		if strings.Contains(string(c.Message), `"method"`) {
			ex.Method, ex.Request = "tools/call", c.Message
			ex.Response = []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
		} else {
			ex.Method, ex.Request = "tools/call", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`)
			ex.Response = c.Message
		}
		r.Hook(ex)
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r.Close(ctx)
	if st := r.Stats(); st.Captured != int64(len(cases)) || st.Depth != int64(len(cases)) {
		t.Fatalf("stats %+v", st)
	}
	var files []string
	filepath.WalkDir(string(home), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 2 {
		t.Fatalf("nothing on disk: %v", files)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, c := range cases {
			for _, s := range c.MustNotContain {
				if strings.Contains(string(b), s) || strings.Contains(string(b), jsonEscaped(s)) {
					t.Errorf("%s: secret of %s (%.10s…) on disk", filepath.Base(f), c.Name, s)
				}
			}
		}
	}
	// The steps themselves are intact JSON.
	d := &spooltest.Collector{}
	if n, err := DrainOrphans(context.Background(), home, d, 0); err != nil || n != len(cases) {
		t.Fatalf("drained %d of %d: %v", n, len(cases), err)
	}
	for _, s := range d.Got() {
		if !json.Valid(s.Request) || (len(s.Response) > 0 && !json.Valid(s.Response)) {
			t.Errorf("step %d: invalid JSON", s.Seq)
		}
	}
}

// TestRecorderDropsWhenQueueFull: with a tiny queue bound and no spill,
// or a spill over its bound, Hook never waits; what does not fit is
// counted as dropped, and what is recorded is still numbered without gaps.
func TestRecorderDropsWhenQueueFull(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxSpill int64
	}{
		{"no spill", -1},
		{"spill over its bound", 20 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := hindsight.Home(t.TempDir())
			d := &spooltest.Collector{}
			r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: slog.New(slog.DiscardHandler),
				MaxQueueBytes: 8 << 10, Workers: 1, MaxSpillBytes: tc.maxSpill})
			if err != nil {
				t.Fatal(err)
			}
			exs := exchanges(2000)
			for _, ex := range exs {
				r.Hook(ex)
			}
			if err := r.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := r.Stats()
			if st.Dropped == 0 || st.Captured+st.Dropped != 2000 || (tc.maxSpill > 0) != (st.ExchangesSpilled > 0) {
				t.Fatalf("stats %+v", st)
			}
			testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return r.Stats().Delivered == st.Captured })
			if err := r.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i, s := range d.Got() {
				if s.Seq != uint64(i+1) {
					t.Fatalf("gap at %d: seq %d", i, s.Seq)
				}
			}
		})
	}
}

// TestRecorderHandsOffInBatches: while the outbox journals, queued
// exchanges wait for the hand-off linger (here an hour) unless a full
// batch is waiting or Sync asks for them; Close hands over the rest. Without a deliverer the
// outbox cannot journal, and the hand-off comes after commitLinger.
func TestRecorderHandsOffInBatches(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{}
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r.in.handOff = time.Hour
	exs := exchanges(handOffBatch + 10)
	for _, ex := range exs[:handOffBatch-1] {
		r.Hook(ex)
	}
	time.Sleep(100 * time.Millisecond)
	if st := r.Stats(); st.Captured != 0 {
		t.Fatalf("%d steps captured before the linger or a full batch", st.Captured)
	}
	r.Hook(exs[handOffBatch-1])
	testkit.WaitFor(t, "a full batch handed over", 20*time.Second, func() bool { return r.Stats().Captured == handOffBatch })
	for _, ex := range exs[handOffBatch : handOffBatch+5] {
		r.Hook(ex)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Sync(ctx); err != nil {
		t.Fatalf("Sync waited for the linger: %v", err)
	}
	if st := r.Stats(); st.Captured != handOffBatch+5 {
		t.Fatalf("%d steps captured after Sync, want %d", st.Captured, handOffBatch+5)
	}
	for _, ex := range exs[handOffBatch+5:] {
		r.Hook(ex)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	spooltest.CheckInOrder(t, d.Got(), len(exs), r.Source())

	r, err = New(Options{Home: hindsight.Home(t.TempDir()), Redactor: testRedactor(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	r.in.handOff = time.Hour
	for _, ex := range exchanges(5) {
		r.Hook(ex)
	}
	testkit.WaitFor(t, "steps handed over without a journal", 20*time.Second, func() bool { return r.Stats().Captured == 5 })
}
