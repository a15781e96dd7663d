// Package telemetry is the configuration of the OpenTelemetry traces that
// sidecars export (package otlp exports them): the configuration file's
// block and the standard OTEL_* variables resolved into Settings. It links
// no OpenTelemetry code, so that a build can tell whether tracing is on
// without carrying the exporters.
package telemetry
