package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/reflect"
	"github.com/hindsight-proxy/hindsight/replay"
	tracestore "github.com/hindsight-proxy/hindsight/traces"
	"github.com/prometheus/client_golang/prometheus"
)

// newReflectionQueue builds the daemon's reflection: the LLM reflector when
// a model is configured (with the rule-based one as its cross-check), else
// the rule-based reflector alone; validation with the capture redactor;
// merging into store; and the queue in the trace store's database,
// started. The daemon closes the queue before the trace store and the
// experience store; with no experience store (nil) it fails.
func newReflectionQueue(ctx context.Context, g *globals, traces *tracestore.Store, store hindsight.ExperienceStore, logger *slog.Logger) (daemon.ReflectionQueue, io.Closer, error) {
	if store == nil {
		return nil, nil, fmt.Errorf("start reflection: no experience store")
	}
	red, err := newRedactor(g)
	if err != nil {
		return nil, nil, fmt.Errorf("start reflection: %w", err)
	}
	metrics := reflect.NewMetrics()
	p := &reflect.Pipeline{
		Reflector: reflect.Rules{},
		Validator: &reflect.Validator{Redactor: reflect.RedactorFunc(red.RedactString), Metrics: metrics, Logger: logger},
		Merger: &reflect.Merger{Store: store, Namespace: g.config.Store.Namespace, Namespaces: g.config.Store.Namespaces,
			Machine: sourceMachine(g.home),
			Metrics: metrics, Logger: logger},
		Logger: logger,
		Helped: inject.Helped,
		Harmed: inject.Harmed,
	}
	if e, ok := store.(interface{ Embedder() hindsight.Embedder }); ok {
		p.Merger.Embedder = e.Embedder()
	} else if emb, err := newEmbedder(ctx, g); err == nil {
		p.Merger.Embedder = emb
	} else {
		logger.Warn("reflection compares experiences by words: no embedder", "err", err)
	}
	// newLLM builds the LLM reflector, with another model or prompt file
	// when given (reflect --replay).
	newLLM := func(model, prompt string) (reflect.Reflector, error) {
		llm := g.config.LLM
		if model != "" {
			llm.Model = model
		}
		if prompt != "" {
			llm.PromptTemplate = prompt
		}
		if llm.Model == "" {
			return nil, errors.New("no LLM model configured (llm.model, or --model)")
		}
		if backends.LLM == nil {
			return nil, fmt.Errorf("this build has no LLM reflector (use %s)", FullBinary)
		}
		return backends.LLM(LLMConfig{
			BaseURL: llm.BaseURL, APIKey: llm.APIKey, Model: llm.Model,
			PromptTemplate: llm.PromptTemplate,
			CallsPerHour:   llm.CallsPerHour, TokensPerHour: llm.TokensPerHour,
			Redactor: reflect.RedactorFunc(red.RedactString),
			Logger:   logger, Metrics: metrics,
		})
	}
	if llm := g.config.LLM; llm.Model != "" {
		r, err := newLLM("", "")
		if err != nil {
			return nil, nil, fmt.Errorf("start reflection: %w", err)
		}
		p.Reflector, p.CrossCheck = r, reflect.Rules{}
		logger.Info("reflection uses the LLM", "model", llm.Model, "base_url", llm.BaseURL)
	} else {
		logger.Info("reflection is rule-based: no LLM model configured")
	}
	// The queue keeps its keys (reflectq/…) in the trace store's Badger:
	// one database, one pair of compactors, one set of caches. A home of
	// the layout before it has the queue in daemon/reflect: moved here.
	db, n, err := traces.QueueDB(filepath.Join(g.home.DaemonData(), "reflect"))
	if err != nil {
		return nil, nil, fmt.Errorf("start reflection: %w", err)
	} else if n > 0 {
		logger.Info("moved the reflection queue into the trace store", "keys", n)
	}
	// Reflection reads a long task in part (tracestore.ReflectionSource).
	q := reflect.NewQueue(db, tracestore.ReflectionSource{Traces: traces, Logger: logger}, p)
	if p.Templates, err = reflect.NewTemplates(q); err != nil {
		return nil, nil, fmt.Errorf("start reflection: %w", err)
	}
	q.Logger, q.Metrics = logger, metrics
	q.OnState = traces.SetReflection
	q.Written = traces.MarkWritten
	q.Start(ctx)
	var closer io.Closer = q
	if every := g.config.Store.Weaviate.DedupeSweep; g.config.Store.Backend == "weaviate" && every >= 0 {
		closer = startSweeper(ctx, &reflect.Sweeper{Merger: p.Merger, Interval: every}, q)
	}
	return daemonQueue{q, p.Templates, p, traces, newLLM}, closer, nil
}

// sweeperCloser stops the dedupe sweep, then closes the queue.
type sweeperCloser struct {
	stop  context.CancelFunc
	done  chan struct{}
	queue io.Closer
}

func (c sweeperCloser) Close() error {
	c.stop()
	<-c.done
	return c.queue.Close()
}

// startSweeper runs s (daemons sharing a Weaviate store learn the same
// lesson at once; see reflect.Sweeper) until the returned closer, which
// also closes queue, is called.
func startSweeper(ctx context.Context, s *reflect.Sweeper, queue io.Closer) io.Closer {
	sctx, stop := context.WithCancel(ctx)
	c := sweeperCloser{stop: stop, done: make(chan struct{}), queue: queue}
	go func() {
		defer close(c.done)
		s.Run(sctx)
	}()
	return c
}

// daemonQueue adapts reflect.Queue to daemon.ReflectionQueue. It is also a
// prometheus.Collector of reflection's counters.
type daemonQueue struct {
	*reflect.Queue
	templates *reflect.Templates
	pipeline  *reflect.Pipeline
	traces    *tracestore.Store
	newLLM    func(model, prompt string) (reflect.Reflector, error)
}

// ReplayReflection runs reflection again over stored tasks
// (daemon.ReflectReplayer): the daemon's pipeline, or one with the rule
// reflector or another LLM model or prompt, through replay.ReflectAgain.
func (d daemonQueue) ReplayReflection(ctx context.Context, req daemon.ReflectReplayRequest, tasks []string, progress func(done, total int)) (*daemon.ReflectPlan, error) {
	p := *d.pipeline
	switch req.Reflector {
	case "":
		if req.Model != "" || req.Prompt != "" {
			req.Reflector = "llm"
		}
	case "rules", "llm":
	default:
		return nil, fmt.Errorf("replay reflection: unknown reflector %q (want rules or llm)", req.Reflector)
	}
	switch req.Reflector {
	case "rules":
		p.Reflector, p.CrossCheck = reflect.Rules{}, nil
	case "llm":
		r, err := d.newLLM(req.Model, req.Prompt)
		if err != nil {
			return nil, fmt.Errorf("replay reflection: %w", err)
		}
		p.Reflector, p.CrossCheck = r, reflect.Rules{}
	}
	return replay.ReflectAgain(ctx, tasks, replay.ReflectOptions{
		Pipeline: &p, Templates: d.templates, Tasks: tracestore.ReflectionSource{Traces: d.traces, Logger: p.Logger},
		DryRun: req.DryRun, Progress: progress,
	})
}

// Rejected lists the latest lessons reflection refused
// (daemon.RejectionLister).
func (d daemonQueue) Rejected(ctx context.Context, limit int) ([]daemon.Rejection, error) {
	entries, err := d.Queue.Rejected(ctx)
	if err != nil {
		return nil, err
	}
	var out []daemon.Rejection
	for _, e := range entries {
		for _, r := range e.Rejected {
			if len(out) == limit {
				return out, nil
			}
			out = append(out, daemon.Rejection{TaskID: e.TaskID, At: e.UpdatedAt, Reason: r.Reason, Detail: r.Detail,
				Server: r.Server, Tool: r.Tool, Origin: r.Origin, Lesson: r.Lesson})
		}
	}
	return out, nil
}

// AnnotateStep gives a failed step its error template as the daemon reads
// it (daemon.StepAnnotator).
func (d daemonQueue) AnnotateStep(s *hindsight.Step) { d.templates.AnnotateStep(s) }

var _ prometheus.Collector = daemonQueue{}

func (d daemonQueue) Stats(ctx context.Context) (daemon.QueueStats, error) {
	s, err := d.Queue.Stats(ctx)
	out := daemon.QueueStats{
		Pending: s.Pending, Retrying: s.Retrying, Running: s.Running, Done: s.Done, Failed: s.Failed,
		LastError: s.LastError, Dropped: s.Dropped, Merged: s.Merged,
		LLMCallsLastHour: s.LLMCallsLastHour, LLMTokensLastHour: s.LLMTokensLastHour,
	}
	if !s.LastRun.IsZero() {
		t := s.LastRun.Truncate(time.Millisecond)
		out.LastRunAt = &t
	}
	return out, err
}

func (d daemonQueue) Describe(ch chan<- *prometheus.Desc) { d.Queue.Metrics.Describe(ch) }
func (d daemonQueue) Collect(ch chan<- prometheus.Metric) { d.Queue.Metrics.Collect(ch) }

// sourceMachine names this daemon in the experiences it learns
// (Experience.SourceMachine): the host name and the first 8 hex digits of
// the SHA-256 of its home directory's absolute path.
func sourceMachine(home hindsight.Home) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	dir, err := filepath.Abs(string(home))
	if err != nil {
		dir = string(home)
	}
	sum := sha256.Sum256([]byte(dir))
	return host + "/" + hex.EncodeToString(sum[:4])
}
