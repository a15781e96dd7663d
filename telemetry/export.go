package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newExporter builds the OTLP exporter of s's protocol. What s leaves
// unset the exporter reads from the OTEL_EXPORTER_OTLP_* variables.
func newExporter(ctx context.Context, s settings) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	if s.protocol == ProtocolGRPC {
		var opts []otlptracegrpc.Option
		if s.endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.endpoint))
		}
		if s.headers != nil {
			opts = append(opts, otlptracegrpc.WithHeaders(s.headers))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		var opts []otlptracehttp.Option
		if s.endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(s.endpoint))
		}
		if s.headers != nil {
			opts = append(opts, otlptracehttp.WithHeaders(s.headers))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("start OTLP exporter: %w", err)
	}
	return exp, nil
}

// countingExporter counts the spans its exporter sent and failed to send.
type countingExporter struct {
	sdktrace.SpanExporter
	exported, failed atomic.Int64
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.failed.Add(int64(len(spans)))
	} else {
		e.exported.Add(int64(len(spans)))
	}
	return err
}

// onceHandler logs the SDK's first error (a failed export) as a warning
// and the rest at debug level, so an unreachable collector is said once,
// not per batch.
func onceHandler(logger *slog.Logger) otel.ErrorHandlerFunc {
	var said atomic.Bool
	return func(err error) {
		if said.CompareAndSwap(false, true) {
			logger.Warn("export traces (further failures are counted, summed up at exit)", "err", err)
			return
		}
		logger.Debug("export traces", "err", err)
	}
}
