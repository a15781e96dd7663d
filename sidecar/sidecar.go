package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/internal/imagetrim"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/toolpin"
)

// Config is what a sidecar is built from. The command line fills it from
// its flags, the configuration file and the environment; New reads no
// environment.
type Config struct {
	Home hindsight.Home
	// Server is the wrapped server's name, in steps, logs and stats.
	Server string
	// Transport is the agent's side: "stdio" (one server, whose sidecar
	// keeps its memory bounded) or "streamable-http"; RunStdio and Serve
	// set it.
	Transport string
	Logger    *slog.Logger // nil: slog.Default()

	// Capture, when set, records the traffic: New sets its Home, Server,
	// Redactor, Deliverer and Logger. Nil relays without recording.
	Capture *capture.Options
	// Redact holds the user's redaction rules, added to the built-in ones.
	Redact capture.RedactorConfig
	// EndTask acts on an agent's word that its task is finished
	// (inject.FinalMetaKey, trigger_hindsight) when capture records.
	EndTask bool

	// Inject, when set, gives lessons back. Its settings are the
	// caller's; New sets its Source (the daemon's client), Server, Logger
	// and EndTaskCheck, and starts its Prefetch.
	Inject *inject.Injector
	// PinTools withholds changed and flagged tools (toolpin.Pinner's
	// Enforce); without it they are only reported.
	PinTools bool

	// Exe is the executable that runs the daemon (`EXE daemon`) when none
	// answers; "" is the running one. DaemonArgs are the global arguments
	// it is started with, such as --config.
	Exe        string
	DaemonArgs []string
	// DrainReserve is the free space the sidecar keeps on the
	// filesystem while it drains the outboxes of dead sidecars (see
	// spool.DrainOptions.DiskReserve; 0: the default).
	DrainReserve int64
	// Tracing, when set, starts exporting spans: hook sees every exchange
	// after the other stages (nil: tracing is off), and stop flushes after
	// everything else stopped.
	Tracing func() (hook func(*proxy.Exchange), stop func())
}

// Sidecar is what runs beside the relay in `wrap` and `serve`: capture
// and its outbox, the end of tasks, tool pinning, injection, tracing, and
// the keeper of the daemon they all talk to. Transports take Hooks from
// it and call Close when they stop, which drains what is still queued.
type Sidecar struct {
	// Hooks is the chain the relay calls (see New for its order).
	Hooks *proxy.Hooks

	cfg       Config
	client    *daemon.Client
	keeper    *keeper
	recorder  *capture.Recorder // nil when capture is off or failed
	red       *capture.Redactor // the recorder's; redacts the task ids noteFinal names
	pins      *toolpin.Pinner
	stopQuiet context.CancelFunc // stops capture.ReleaseWhenQuiet; nil unless stdio
	stopStats func()             // nil without a recorder
	stopTrace func()             // nil without tracing

	mu       sync.Mutex
	sessions map[string]bool // sessions seen → ended
	server   ServerCounter   // the wrapped server's starts and crashes; nil when not stdio
	refused  func() int64    // serve's count of requests refused over its body budget; nil for stdio

	ending  sync.WaitGroup // tasks being ended (noteFinal)
	closing chan struct{}  // closed when Close begins
}

// ServerCounter is what a stdio sidecar reports of its server's life
// (proxy.Stdio has it).
type ServerCounter interface {
	Starts() int64
	Crashes() int64
	LastCrash() time.Time
}

// CountServer makes the sidecar's stats report c's starts and crashes.
func (s *Sidecar) CountServer(c ServerCounter) {
	s.mu.Lock()
	s.server = c
	s.mu.Unlock()
}

// New builds the sidecar of cfg.Server. It never blocks on the daemon:
// the daemon is started in the background when none answers, and
// capture's outbox buffers steps meanwhile. When capture cannot start, the
// sidecar logs why and relays without recording.
//
// The relay calls its stages in this order, one list (see chain for how
// each hook composes):
//
//  1. tool pinning: withholds changed tools from tools/list and answers
//     their calls, before injection adds Hindsight's own tools;
//  2. injection: rewrites initialize, tools/list and failed tool results,
//     answers query_hindsight and trigger_hindsight, and marks on each
//     exchange what it injected, before capture records it;
//  3. sessions: notes each session seen, to end it at Close;
//  4. capture: records the exchange as a step (Record journals it before
//     its answer reaches the agent, on stdio and HTTP);
//  5. task ends: an exchange that ends the agent's task, once its step is
//     recorded, tells the daemon;
//  6. tracing: a span per tools/call, seeing each exchange last.
func New(cfg Config) (*Sidecar, error) {
	// Nothing is recorded into a home another user owns.
	if err := cfg.Home.Ensure(); err != nil {
		return nil, err
	}
	exe := cfg.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	logger := cfg.Logger
	s := &Sidecar{
		cfg:      cfg,
		client:   daemon.NewClient(cfg.Home.Socket()),
		keeper:   newKeeper(),
		sessions: map[string]bool{},
		closing:  make(chan struct{}),
	}
	if cfg.Transport == "stdio" {
		// One server's sidecar: its memory is bounded by design (see
		// capture.MemoryBudget), so the collector keeps it there.
		logger.Debug("soft memory limit", "bytes", capture.SetMemoryLimit())
		// and gives back what a burst of calls left free.
		quiet, stopQuiet := context.WithCancel(context.Background())
		go capture.ReleaseWhenQuiet(quiet)
		s.stopQuiet = stopQuiet
	}
	if cfg.Capture == nil {
		logger.Info("capture is off (capture.enabled: false or HINDSIGHT_CAPTURE=off): relaying without recording", "server", cfg.Server)
	} else if err := s.startCapture(); err != nil {
		// Recording never breaks the relay: the agent keeps its server,
		// this session is just not recorded.
		logger.Error("capture disabled for this session", "server", cfg.Server, "err", err)
	}
	s.keeper.start(cfg.Home, exe, cfg.DaemonArgs, logger)
	if s.recorder != nil {
		s.stopStats = s.reportStats()
	}
	s.pins = toolpin.New(cfg.Home, cfg.Server, cfg.PinTools, logger)
	var trace func(*proxy.Exchange)
	if cfg.Tracing != nil {
		trace, s.stopTrace = cfg.Tracing()
		if trace == nil {
			s.stopTrace = nil
		}
	}
	s.Hooks = chain(s.stages(trace))
	if cfg.Inject != nil {
		go cfg.Inject.Prefetch(context.Background())
	}
	// Start-up touched code and data of the whole binary that relaying
	// never runs again: out of the resident set with them.
	logger.Debug("dropped the executable's pages from memory", "bytes", imagetrim.Trim())
	return s, nil
}

// stages lists the sidecar's stages in the order New documents.
func (s *Sidecar) stages(trace func(*proxy.Exchange)) []stage {
	list := []stage{{"tool pinning", proxy.Hooks{ToolsList: s.pins.ToolsList, ToolCall: s.pins.ToolCall}}}
	if inj := s.injector(); inj != nil {
		h := proxy.Hooks{Initialize: inj.Initialize, ToolsList: inj.ToolsList, ToolCall: inj.ToolCall,
			ToolResult: inj.ToolResult, Exchange: inj.Record}
		if s.recorder != nil {
			// What was injected is on the exchange before capture's
			// Record journals it.
			h.Record = func(exs []*proxy.Exchange) {
				for _, ex := range exs {
					inj.Record(ex)
				}
			}
		}
		list = append(list, stage{"injection", h})
	}
	list = append(list, stage{"sessions", proxy.Hooks{Exchange: s.noteSession}})
	if s.recorder != nil {
		list = append(list, stage{"capture", proxy.Hooks{Record: s.recorder.Record, Exchange: s.recorder.Hook}})
		if s.cfg.EndTask {
			list = append(list, stage{"task ends", proxy.Hooks{Exchange: s.noteFinal}})
		}
	}
	if trace != nil {
		list = append(list, stage{"tracing", proxy.Hooks{Exchange: trace}})
	}
	return list
}

// injector completes cfg.Inject with its source, the daemon's client, or
// returns nil when the sidecar injects nothing.
func (s *Sidecar) injector() *inject.Injector {
	inj := s.cfg.Inject
	if inj == nil {
		return nil
	}
	inj.Source, inj.Server, inj.Logger = s.client, s.cfg.Server, s.cfg.Logger
	if inj.EndTaskTool {
		inj.EndTaskCheck = func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*downCheckTimeout)
			defer cancel()
			_, err := s.client.Health(ctx)
			return err
		}
	}
	return inj
}

// startCapture starts the recorder and its outbox, delivering to the
// daemon through the keeper, which then also drains what dead sidecars
// and this one's missed ends left.
func (s *Sidecar) startCapture() error {
	red, err := capture.NewRedactor(s.cfg.Redact)
	if err != nil {
		return fmt.Errorf("redaction rules: %w", err)
	}
	opts := *s.cfg.Capture
	opts.Home, opts.Server, opts.Redactor, opts.Logger = s.cfg.Home, s.cfg.Server, red, s.cfg.Logger
	opts.Deliverer = deliverer{c: s.client, k: s.keeper}
	rec, err := capture.New(opts)
	if err != nil {
		return fmt.Errorf("start capture: %w", err)
	}
	s.recorder, s.red = rec, red
	logger := s.cfg.Logger
	s.keeper.drain = func(ctx context.Context) {
		if err := rec.DeliverEnds(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("tell the daemon the ends it missed", "err", err)
		}
		n, err := capture.DrainOrphans(ctx, s.cfg.Home, deliverer{c: s.client, k: s.keeper}, s.cfg.DrainReserve)
		if err != nil && ctx.Err() == nil {
			logger.Warn("drain outboxes of dead sidecars", "delivered", n, "err", err)
		} else if n > 0 {
			logger.Info("drained outboxes of dead sidecars", "delivered", n)
		}
	}
	return nil
}

// Close stops the sidecar's background work after a final drain, each
// part after those that feed it.
func (s *Sidecar) Close() {
	// Digests of tools/list results still running.
	s.pins.Wait()
	// Tasks being ended finish (their steps are delivered first), at once
	// when the daemon does not answer.
	close(s.closing)
	s.ending.Wait()
	// The sessions' ends: told the daemon, else noted in the outbox,
	// which the final drain then keeps.
	s.closeSessions()
	if s.recorder != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.drainTimeout())
		if err := s.recorder.Close(ctx); err != nil {
			s.cfg.Logger.Warn("close capture", "err", err)
		}
		cancel()
	}
	s.keeper.stop()
	if s.stopStats != nil {
		s.stopStats() // the last word, after capture's final drain
	}
	if s.stopQuiet != nil {
		s.stopQuiet()
	}
	// Tracing flushes after everything else stopped.
	if s.stopTrace != nil {
		s.stopTrace()
	}
}
