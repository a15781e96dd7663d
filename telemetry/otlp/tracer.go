package otlp

import (
	"context"
	"fmt"
	"github.com/hindsight-proxy/hindsight/telemetry"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/hindsight-proxy/hindsight/proxy"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// QueueSize bounds the calls waiting for their span; past it a call's span
// is dropped (and counted), never waited for.
const QueueSize = 2048

// FlushTimeout bounds the last export when the sidecar stops; what is not
// exported by then is lost.
const FlushTimeout = 2 * time.Second

// instrumentation is the tracer's name.
const instrumentation = "github.com/hindsight-proxy/hindsight/telemetry"

// Start starts tracing as cfg and the environment say. The OTEL_*
// variables are read here, from the process's environment, as the
// OpenTelemetry specification has every SDK read them (the exporter reads
// more of them itself: headers, certificates, timeouts), so the command
// line does not pass them down. It returns the
// proxy.Hooks.Exchange hook that traces each tools/call, and the function
// that flushes and stops it within FlushTimeout; hook is nil when tracing
// is off or could not start (which is logged: tracing never stops the
// relay), and shutdown then does nothing.
func Start(cfg telemetry.Config, logger *slog.Logger) (hook func(*proxy.Exchange), shutdown func()) {
	s, on, err := telemetry.Resolve(cfg, os.Getenv)
	if err == nil && on {
		var t *tracer
		if t, err = newTracer(context.Background(), s, logger); err == nil {
			endpoint := s.Endpoint
			if endpoint == "" {
				endpoint = "from OTEL_EXPORTER_OTLP_*ENDPOINT"
			}
			logger.Info("tracing tool calls over OTLP", "protocol", s.Protocol, "endpoint", endpoint)
			return t.Hook, t.Shutdown
		}
	}
	if err != nil {
		logger.Error("tracing is off", "err", err)
	}
	return nil, func() {}
}

// tracer turns exchanges into spans on its own goroutine and exports them
// in batches.
type tracer struct {
	queue     chan *proxy.Exchange
	stop      chan struct{}
	done      chan struct{}
	provider  *sdktrace.TracerProvider
	tracer    trace.Tracer
	exporter  *countingExporter
	logger    *slog.Logger
	dropped   atomic.Int64 // calls whose span the full queue dropped
	accepted  atomic.Int64 // calls queued for their span
	unsampled atomic.Int64 // spans the sampler left out
	stopOnce  sync.Once
}

func newTracer(ctx context.Context, s telemetry.Settings, logger *slog.Logger) (*tracer, error) {
	exp, err := newExporter(ctx, s)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", s.Service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("describe resource: %w", err)
	}
	otel.SetLogger(logr.FromSlogHandler(logger.Handler()))
	otel.SetErrorHandler(onceHandler(logger))
	counted := &countingExporter{SpanExporter: exp}
	// Blocking hands a full batch queue's back-pressure to the worker,
	// whose own queue then drops, counted.
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res),
		sdktrace.WithBatcher(counted, sdktrace.WithBlocking())}
	if s.SampleRatio != nil {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*s.SampleRatio))))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	t := &tracer{
		queue:    make(chan *proxy.Exchange, QueueSize),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		provider: tp,
		tracer:   tp.Tracer(instrumentation),
		exporter: counted,
		logger:   logger,
	}
	go t.run()
	return t, nil
}

// Hook queues a tools/call exchange for its span without waiting; a full
// queue drops it, counted (the first drop is logged).
func (t *tracer) Hook(ex *proxy.Exchange) {
	if ex == nil || !traced(ex) {
		return
	}
	select {
	case t.queue <- ex:
		t.accepted.Add(1)
	default:
		if t.dropped.Add(1) == 1 {
			t.logger.Warn("trace queue full: dropping spans of tool calls (counted; summed up at exit)")
		}
	}
}

func (t *tracer) run() {
	defer close(t.done)
	for {
		select {
		case ex := <-t.queue:
			t.emit(ex)
		case <-t.stop:
			for {
				select {
				case ex := <-t.queue:
					t.emit(ex)
				default:
					return
				}
			}
		}
	}
}

// emit records ex's span with the exchange's own start and end times.
func (t *tracer) emit(ex *proxy.Exchange) {
	c := describe(ex)
	ctx := context.Background()
	if c.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, c.parent)
	}
	_, span := t.tracer.Start(ctx, c.name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(ex.Started), trace.WithAttributes(c.attrs...))
	if c.errType != "" {
		span.SetStatus(codes.Error, c.errType)
	}
	span.End(trace.WithTimestamp(ex.Ended))
	if !span.SpanContext().IsSampled() {
		t.unsampled.Add(1)
	}
}

// Shutdown spans the calls still queued, exports what it can within
// FlushTimeout and stops; it logs what was lost. Calls after the first do
// nothing.
func (t *tracer) Shutdown() {
	t.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
		defer cancel()
		close(t.stop)
		select {
		case <-t.done:
		case <-ctx.Done():
		}
		if err := t.provider.Shutdown(ctx); err != nil {
			t.logger.Warn("flush traces", "err", err)
		}
		exported, failed := t.exporter.exported.Load(), t.exporter.failed.Load()
		dropped, unsent := t.dropped.Load(), t.accepted.Load()-t.unsampled.Load()-exported-failed
		if failed > 0 || dropped > 0 || unsent > 0 {
			t.logger.Warn("spans lost", "exported", exported, "export_failed", failed,
				"queue_full", dropped, "unsent_at_exit", unsent)
		} else {
			t.logger.Debug("spans exported", "exported", exported)
		}
	})
}
