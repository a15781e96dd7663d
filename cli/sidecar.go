package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/hindsight-proxy/hindsight/toolpin"
	"github.com/tidwall/gjson"
)

// sidecar is what runs beside the proxy in `wrap` and `serve`: capture and
// its outbox, and injection. Transports take Hooks from it and call Close
// when they stop, which drains what is still queued.
type sidecar struct {
	Hooks   *proxy.Hooks
	closers []func()

	client   *daemon.Client
	keeper   *daemonKeeper
	recorder *capture.Recorder // nil until capture started
	red      *capture.Redactor // the recorder's; redacts the task ids noteFinal names
	logger   *slog.Logger

	mu       sync.Mutex
	sessions map[string]bool // sessions seen → ended
	server   serverCounter   // the wrapped server's starts and crashes; nil when not stdio
	refused  func() int64    // serve's count of requests refused over its body budget (see bodiesRefused)

	ending  sync.WaitGroup // tasks being ended (noteFinal)
	closing chan struct{}  // closed when Close begins
}

// serverCounter is what a stdio sidecar reports of its server's life
// (proxy.Stdio has it).
type serverCounter interface {
	Starts() int64
	Crashes() int64
	LastCrash() time.Time
}

// CountServer makes the sidecar's stats report c's starts and crashes.
func (s *sidecar) CountServer(c serverCounter) {
	s.mu.Lock()
	s.server = c
	s.mu.Unlock()
}

// sessionCloseTimeout bounds telling the daemon that sessions ended.
const sessionCloseTimeout = 3 * time.Second

// finalDrainTimeout bounds the outbox's last delivery when the sidecar
// stops; what is left stays on disk for the next sidecar or the daemon.
const finalDrainTimeout = 3 * time.Second

// newSidecar builds the sidecar for the server called name, speaking
// transport ("stdio", "streamable-http", "sse").
//
// It never blocks on the daemon: the daemon is started in the background
// when none answers, and capture's outbox buffers steps meanwhile.
func newSidecar(ctx context.Context, g *globals, name, transport string, logger *slog.Logger) (*sidecar, error) {
	// Nothing is recorded into a home another user owns.
	if err := g.home.Ensure(); err != nil {
		return nil, err
	}
	s := &sidecar{
		Hooks:    &proxy.Hooks{},
		client:   daemon.NewClient(g.home.Socket()),
		logger:   logger,
		sessions: map[string]bool{},
		closing:  make(chan struct{}),
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s.keeper = newKeeper()
	if transport == "stdio" {
		// One server's sidecar: its memory is bounded by design (see
		// capture.MemoryBudget), so the collector keeps it there.
		logger.Debug("soft memory limit", "bytes", capture.SetMemoryLimit())
		// and gives back what a burst of calls left free.
		quiet, stopQuiet := context.WithCancel(context.Background())
		go capture.ReleaseWhenQuiet(quiet)
		s.closers = append(s.closers, stopQuiet)
	}
	if !g.config.captureEnabled() {
		logger.Info("capture is off (capture.enabled: false or HINDSIGHT_CAPTURE=off): relaying without recording", "server", name)
		s.Hooks.Exchange = s.noteSession
	} else if rec, err := s.startCapture(g, name, logger); err != nil {
		// Recording never breaks the relay: the agent keeps its server,
		// this session is just not recorded.
		logger.Error("capture disabled for this session", "server", name, "err", err)
		s.Hooks.Exchange = s.noteSession
	} else {
		s.recorder = rec
		// A step is journaled before its answer reaches the agent (stdio
		// and HTTP): a host that kills its servers at exit loses none.
		s.Hooks.Record = rec.Record
		endTask := g.config.Inject.EndTask == nil || *g.config.Inject.EndTask
		s.Hooks.Exchange = func(ex *proxy.Exchange) {
			s.noteSession(ex)
			rec.Hook(ex)
			if endTask {
				s.noteFinal(ex)
			}
		}
		s.keeper.drain = func(ctx context.Context) {
			if err := rec.DeliverEnds(ctx); err != nil && ctx.Err() == nil {
				logger.Warn("tell the daemon the ends it missed", "err", err)
			}
			n, err := capture.DrainOrphans(ctx, g.home, deliverer{c: s.client, k: s.keeper})
			if err != nil && ctx.Err() == nil {
				logger.Warn("drain outboxes of dead sidecars", "delivered", n, "err", err)
			} else if n > 0 {
				logger.Info("drained outboxes of dead sidecars", "delivered", n)
			}
		}
	}
	s.keeper.start(g, exe, logger)
	if s.recorder != nil {
		s.closers = append(s.closers, s.reportStats(g, name))
	}
	// Close runs these backwards: the sessions' ends (told the daemon,
	// else noted in the outbox), capture's final drain, then the stats
	// writer and the keeper stop.
	s.closers = append(s.closers, s.keeper.stop)
	if s.recorder != nil {
		s.closers = append(s.closers, func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.drainTimeout())
			defer cancel()
			if err := s.recorder.Close(ctx); err != nil {
				logger.Warn("close capture", "err", err)
			}
		})
	}
	s.closers = append(s.closers, s.closeSessions)

	// Before anything stops: tasks being ended finish (their steps are
	// delivered first), at once when the daemon does not answer.
	s.closers = append(s.closers, s.ending.Wait, func() { close(s.closing) })

	// Injection goes last: its Exchange hook records what it injected
	// before the hooks set above (capture's recorder) see the exchange.
	installInjector(g, name, s.client, s.Hooks, logger)

	// Pinning runs before injection: query_hindsight is Hindsight's own,
	// and the tools withheld are gone before it is added.
	pins := toolpin.New(g.home, name, g.pinToolsOn(), logger)
	pins.Install(s.Hooks)
	s.closers = append(s.closers, pins.Wait)

	// Tracing sees each exchange last, and flushes after everything else
	// stopped.
	if backends.Tracing == nil {
		return s, nil // tracing is off (see tracingElsewhere)
	}
	if hook, stop := backends.Tracing(g.config.Telemetry, logger); hook != nil {
		prev := s.Hooks.Exchange
		s.Hooks.Exchange = func(ex *proxy.Exchange) { prev(ex); hook(ex) }
		s.closers = append([]func(){stop}, s.closers...)
	}
	return s, nil
}

// deliverer is the daemon client as capture's outbox sees it: a failed
// delivery wakes the keeper, which restarts a daemon that died.
type deliverer struct {
	c *daemon.Client
	k *daemonKeeper
}

// DeliverEnd tells the daemon an end noted in the outbox (spool.Ender): a
// task the agent ended, or a session closed after its LastSeq step.
func (d deliverer) DeliverEnd(ctx context.Context, source string, e spool.End) error {
	if e.Final {
		_, err := d.c.FinalTask(ctx, daemon.FinalRequest{TaskID: e.TaskID, SessionID: e.SessionID})
		if errors.Is(err, hindsight.ErrNotFound) {
			return nil // its steps never arrived: nothing to end
		}
		return err
	}
	var last *uint64
	if e.LastSeq == 0 {
		source = "" // no step: the session is closed at once
	} else {
		last = &e.LastSeq
	}
	_, err := d.c.CloseSession(ctx, e.SessionID, source, last)
	return err
}

func (d deliverer) Deliver(ctx context.Context, steps []hindsight.Step) error {
	err := d.c.Deliver(ctx, steps)
	if err != nil && !errors.Is(err, daemon.ErrRejected) && ctx.Err() == nil {
		d.k.wake()
	}
	return rejected(err)
}

// DeliverRaw sends steps as the outbox stores them (spool.RawDeliverer).
func (d deliverer) DeliverRaw(ctx context.Context, steps []json.RawMessage) error {
	err := d.c.DeliverRaw(ctx, steps)
	if err != nil && !errors.Is(err, daemon.ErrRejected) && ctx.Err() == nil {
		d.k.wake()
	}
	return rejected(err)
}

// rejected maps the daemon's refusal of a batch to the spool's, so the outbox
// sets the refused steps aside instead of retrying them for ever, and a
// daemon short of disk space to spool.ErrDaemonFull, so the outbox tries
// again within a second.
func rejected(err error) error {
	if errors.Is(err, daemon.ErrDiskFull) && !errors.Is(err, spool.ErrDaemonFull) {
		return fmt.Errorf("%w: %w", spool.ErrDaemonFull, err)
	}
	if err != nil && errors.Is(err, daemon.ErrRejected) && !errors.Is(err, spool.ErrRejected) {
		return fmt.Errorf("%w: %w", spool.ErrRejected, err)
	}
	return err
}

// newRedactor builds the redactor with the user's rules from the config.
func newRedactor(g *globals) (*capture.Redactor, error) {
	cfg := capture.RedactorConfig{Keys: g.config.Capture.Redact.Keys}
	for _, p := range g.config.Capture.Redact.Patterns {
		cfg.Patterns = append(cfg.Patterns, capture.Pattern{Name: p.Name, Regex: p.Regex})
	}
	red, err := capture.NewRedactor(cfg)
	if err != nil {
		return nil, fmt.Errorf("redaction rules: %w", err)
	}
	return red, nil
}

func (s *sidecar) noteSession(ex *proxy.Exchange) {
	if ex.Session == nil || ex.Session.ID == "" {
		return
	}
	s.mu.Lock()
	if _, ok := s.sessions[ex.Session.ID]; !ok {
		s.sessions[ex.Session.ID] = false
	}
	s.mu.Unlock()
}

// EndSession tells the daemon that session id ended (an HTTP session
// deleted or expired); its task may then be final. When the daemon does
// not answer, the end is noted in the outbox, after the session's steps
// (spool.End), for whoever delivers them. Close does this for every
// session still open.
func (s *sidecar) EndSession(ctx context.Context, id string) {
	s.mu.Lock()
	ended, seen := s.sessions[id]
	s.sessions[id] = true
	s.mu.Unlock()
	if ended || !seen {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sessionCloseTimeout)
	defer cancel()
	// The close names the last step recorded so far: the daemon waits for
	// it before it counts the session closed, so the task is not final
	// while its steps still sit in the outbox.
	var source string
	var last *uint64
	if s.recorder != nil {
		if err := s.recorder.Sync(ctx); err == nil {
			if n := s.recorder.Stats().Captured; n > 0 {
				source, last = s.recorder.Source(), new(uint64(n))
			}
		}
	}
	_, err := s.client.CloseSession(ctx, id, source, last)
	if err != nil && isUnreachable(err) && s.recorder != nil {
		// The end travels with the steps: whoever delivers the outbox
		// tells the daemon.
		e := spool.End{SessionID: id, LastSeq: uint64(s.recorder.Stats().Captured)}
		if nerr := s.recorder.NoteEnd(e); nerr == nil {
			s.logger.Info("daemon not reachable: the session's end waits in the outbox", "session", id)
			return
		}
	}
	if err != nil {
		// The task still ends by the idle gap.
		s.logger.Warn("tell the daemon a session ended", "session", id, "err", err)
	}
}

// drainTimeout bounds capture's final drain: finalDrainTimeout, or a moment
// when the daemon does not answer (the outbox keeps the steps for the
// next sidecar or the daemon).
func (s *sidecar) drainTimeout() time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), downCheckTimeout)
	defer cancel()
	if _, err := s.client.Health(ctx); err != nil {
		return downCheckTimeout
	}
	return finalDrainTimeout
}

// downCheckTimeout bounds asking the daemon whether it answers.
const downCheckTimeout = 500 * time.Millisecond

// closeSessions ends every session this sidecar saw. It runs before
// capture's final drain: each close names the session's last step, which
// the daemon waits for, and a close the daemon does not hear is noted in
// the outbox, which the final drain then keeps.
func (s *sidecar) closeSessions() {
	s.mu.Lock()
	var open []string
	for id, ended := range s.sessions {
		if !ended {
			open = append(open, id)
		}
	}
	s.mu.Unlock()
	for _, id := range open {
		s.EndSession(context.Background(), id)
	}
}

// Close stops the sidecar's background work after a final drain, in the
// reverse order of start.
func (s *sidecar) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// daemonKeeper starts the daemon in the background when none answers: at
// start, and again when a delivery fails (at most once per keeperPause).
type daemonKeeper struct {
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// drain, when set, runs each time the daemon was found answering:
	// it delivers outboxes left by dead sidecars.
	drain func(ctx context.Context)
}

// keeperPause spaces restart attempts.
const keeperPause = 5 * time.Second

func newKeeper() *daemonKeeper {
	return &daemonKeeper{kick: make(chan struct{}, 1), done: make(chan struct{})}
}

func (k *daemonKeeper) start(g *globals, exe string, logger *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.wake()
	go func() {
		defer close(k.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.kick:
			}
			_, err := daemon.EnsureRunning(ctx, g.home, exe, daemonArgs(g)...)
			switch {
			case err == nil:
				if k.drain != nil {
					k.drain(ctx)
				}
			case ctx.Err() == nil:
				logger.Warn("daemon not reachable; steps wait in the outbox", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(keeperPause):
			}
		}
	}()
}

func (k *daemonKeeper) wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *daemonKeeper) stop() {
	k.cancel()
	<-k.done
}

// startCapture starts the recorder and its outbox, delivering to the
// daemon through the keeper.
func (s *sidecar) startCapture(g *globals, name string, logger *slog.Logger) (*capture.Recorder, error) {
	red, err := newRedactor(g)
	if err != nil {
		return nil, err
	}
	rec, err := capture.New(capture.Options{
		Home:          g.home,
		Server:        name,
		Namespace:     g.namespace,
		Redactor:      red,
		MaxBodyBytes:  g.config.Capture.MaxBodyBytes,
		MaxSpillBytes: g.config.Capture.MaxSpillBytes,
		Deliverer:     deliverer{c: s.client, k: s.keeper},
		Logger:        logger,
		Retention:     g.config.Outbox.Retention,
		MaxHeldBytes:  g.config.Outbox.MaxHeldBytes,
		DiskReserve:   g.config.Outbox.DiskReserve,
	})
	if err != nil {
		return nil, fmt.Errorf("start capture: %w", err)
	}
	s.red = red
	return rec, nil
}

// postCounters reports capture's counters to the daemon, which serves
// their sums at GET /metrics (see daemon.SidecarReport); a daemon that
// does not answer in reportTimeout misses this report, not the next.
func (s *sidecar) postCounters(name string, st capture.Stats, refused int64) {
	calls, failures := s.recorder.Calls()
	rep := daemon.SidecarReport{Source: s.recorder.Source(), Server: name, PID: os.Getpid(),
		Steps: st.Captured, Spilled: st.Spilled, Dropped: st.Dropped, Redactions: st.Redactions, Calls: calls, Failures: failures, BodiesRefused: refused}
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	if err := s.client.ReportSidecar(ctx, rep); err != nil {
		s.logger.Debug("report counters to the daemon", "err", err)
	}
}

// reportTimeout bounds one report of counters to the daemon.
const reportTimeout = time.Second

// statsInterval spaces the sidecar's reports of its outbox.
const statsInterval = 2 * time.Second

// reportStats writes the outbox's stats into its directory every
// statsInterval, for `hindsight status`, and returns the function that
// stops it.
func (s *sidecar) reportStats(g *globals, name string) func() {
	id := s.recorder.Source()
	stop, done := make(chan struct{}), make(chan struct{})
	write := func() {
		st := s.recorder.Stats()
		out := spool.Stats{Server: name, PID: os.Getpid(), Depth: st.Depth,
			Captured: st.Captured, Delivered: st.Delivered, Dropped: st.Dropped, Rejected: st.Rejected,
			Redactions: st.Redactions, Held: st.Held, DroppedDiskFull: st.DroppedDiskFull, Truncated: st.Truncated,
			BodiesRefused: s.bodiesRefused(), UpdatedAt: time.Now()}
		s.mu.Lock()
		srv := s.server
		s.mu.Unlock()
		if srv != nil {
			out.ServerStarts, out.ServerCrashes = srv.Starts(), srv.Crashes()
			if t := srv.LastCrash(); !t.IsZero() {
				out.LastCrashAt = &t
			}
		}
		_ = spool.WriteStats(g.home, id, out)
		s.postCounters(name, st, out.BodiesRefused)
	}
	go func() {
		defer close(done)
		t := time.NewTicker(statsInterval)
		defer t.Stop()
		for {
			write()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		write() // the last word, after capture's final drain (a removed outbox stays removed)
	}
}

// finalMetaPath finds inject.FinalMetaKey in a request.
var finalMetaPath = "params._meta." + strings.ReplaceAll(inject.FinalMetaKey, ".", `\.`)

// saysFinal reports whether a request sets inject.FinalMetaKey to true.
// Most requests cannot hold the key (its name appears nowhere in them, nor
// a \u escape that could spell it), and those skip the parse.
func saysFinal(req []byte) bool {
	if !bytes.Contains(req, finalKeyName) && !bytes.Contains(req, []byte(`\u`)) {
		return false
	}
	return gjson.GetBytes(req, finalMetaPath).Type == gjson.True
}

// finalKeyName is a part of inject.FinalMetaKey that JSON can write only
// as it is or with \u escapes.
var finalKeyName = []byte("hindsight")

// taskMetaPath finds capture.TaskMetaKey in a request.
var taskMetaPath = "params._meta." + strings.ReplaceAll(capture.TaskMetaKey, ".", `\.`)

// endTaskTimeout bounds ending a task: delivering its steps, then telling
// the daemon (which may be starting).
const endTaskTimeout = 30 * time.Second

// noteFinal ends the task of an agent's request that carries
// _meta["io.hindsight/final"]: true, or that calls the sidecar's
// trigger_hindsight tool, in the background: once the
// exchange's step is delivered, the daemon makes its task (the one the
// request named, else the session's) final and reflects it. Failing that,
// the task still ends by the idle gap.
func (s *sidecar) noteFinal(ex *proxy.Exchange) {
	if ex.Direction != hindsight.ClientToServer || ex.Session == nil {
		return
	}
	trigger := ex.Local && ex.Method == "tools/call" && gjson.GetBytes(ex.Request, "params.name").Str == inject.EndToolName
	if !trigger && !saysFinal(ex.Request) {
		return
	}
	req := daemon.FinalRequest{TaskID: ex.Session.TaskID, SessionID: ex.Session.ID}
	if t := gjson.GetBytes(ex.Request, taskMetaPath); t.Type == gjson.String && t.Str != "" {
		req.TaskID = t.Str
	}
	if t := gjson.GetBytes(ex.Request, "params.arguments.task_id"); trigger && t.Type == gjson.String && t.Str != "" {
		req.TaskID = t.Str
	}
	if req.TaskID != "" {
		// Stored steps carry the id redacted: so does their end.
		req.TaskID, req.SessionID = s.red.RedactName(req.TaskID), ""
	}
	s.ending.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), endTaskTimeout)
		defer cancel()
		if err := s.endTask(ctx, req); err != nil {
			s.logger.Warn("end the task the agent said was finished; it ends by the idle gap", "task", req.TaskID, "session", req.SessionID, "err", err)
		}
	})
}

// endTask delivers what was recorded, then asks the daemon to end the
// task, again while it does not know the task yet or does not answer.
// When it gives up (ctx done, or the sidecar closing) on a daemon that
// does not answer, the end is noted in the outbox, to be told after its
// steps by whoever delivers them.
func (s *sidecar) endTask(ctx context.Context, req daemon.FinalRequest) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		if err := s.recorder.Sync(ctx); err != nil {
			return fmt.Errorf("end task: %w", err)
		}
		res, err := s.client.FinalTask(ctx, req)
		if err == nil {
			s.logger.Info("task ended by the agent", "task", res.TaskID, "queued", res.Queued)
			return nil
		}
		if !errors.Is(err, hindsight.ErrNotFound) && !isUnreachable(err) {
			return fmt.Errorf("end task: %w", err)
		}
		closing := s.closing
		if !isUnreachable(err) {
			closing = nil // its steps are on their way: wait for them
		}
		select {
		case <-ctx.Done():
		case <-closing:
		case <-time.After(wait):
			continue
		}
		if !isUnreachable(err) {
			return fmt.Errorf("end task: %w", err)
		}
		e := spool.End{Final: true, TaskID: req.TaskID, SessionID: req.SessionID, LastSeq: uint64(s.recorder.Stats().Captured)}
		if nerr := s.recorder.NoteEnd(e); nerr != nil {
			return fmt.Errorf("end task: %w (and %w)", err, nerr)
		}
		s.logger.Info("daemon not reachable: the task's end waits in the outbox", "task", req.TaskID, "session", req.SessionID)
		return nil
	}
}

// isUnreachable reports an error of a daemon that did not answer (not one
// it answered).
func isUnreachable(err error) bool {
	var ae *daemon.APIError
	return !errors.As(err, &ae)
}
