package otlp

import (
	"context"
	"fmt"
	"github.com/hindsight-proxy/hindsight/telemetry"
	"log/slog"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newExporter builds the OTLP exporter of s's protocol. What s leaves
// unset the exporter reads from the OTEL_EXPORTER_OTLP_* variables.
func newExporter(ctx context.Context, s telemetry.Settings) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	if s.Protocol == telemetry.ProtocolGRPC {
		var opts []otlptracegrpc.Option
		if s.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.Endpoint))
		}
		if s.Headers != nil {
			opts = append(opts, otlptracegrpc.WithHeaders(s.Headers))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		var opts []otlptracehttp.Option
		if s.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(s.Endpoint))
		}
		if s.Headers != nil {
			opts = append(opts, otlptracehttp.WithHeaders(s.Headers))
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
