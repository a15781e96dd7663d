package telemetry

import (
	"fmt"
	"net/url"
	"strings"
)

// Config is the telemetry block of the configuration file. Tracing is on
// when an endpoint is set here or in the environment; the standard
// OTEL_* variables override the file.
type Config struct {
	// Endpoint is the collector's URL: for http/protobuf its base
	// (http://127.0.0.1:4318; /v1/traces is added when the URL has no
	// path) or the full traces URL, for grpc http://127.0.0.1:4317
	// (https:// for TLS).
	Endpoint string `yaml:"endpoint"`
	// Protocol is "http/protobuf" (default) or "grpc".
	Protocol string `yaml:"protocol"`
	// Headers are sent with every export (an API key, for example).
	Headers map[string]string `yaml:"headers"`
	// ServiceName is the resource's service.name (default "hindsight").
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the share of new traces recorded, 0 to 1 (default
	// 1); a call whose traceparent names a parent follows its decision.
	SampleRatio *float64 `yaml:"sample_ratio"`
}

// Protocols.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// defaultService is the service.name when none is configured.
const defaultService = "hindsight"

// Settings are what the exporter and the provider are built from, the
// file's values where the environment sets none. An empty Endpoint or nil
// Headers leave them to the exporter, which reads the environment itself.
type Settings struct {
	Protocol string
	Endpoint string
	Headers  map[string]string
	Service  string
	// SampleRatio, between 0 and 1, is the parent-based ratio sampler's;
	// nil leaves the SDK's default (OTEL_TRACES_SAMPLER, else parent-based
	// always-on).
	SampleRatio *float64
}

// Resolve combines c with the environment (read through getenv). on is
// false when tracing is off: no endpoint anywhere, OTEL_SDK_DISABLED=true
// or OTEL_TRACES_EXPORTER=none.
func Resolve(c Config, getenv func(string) string) (s Settings, on bool, err error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return s, false, nil
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "", "otlp":
	case "none":
		return s, false, nil
	default:
		return s, false, fmt.Errorf("read OTEL_TRACES_EXPORTER: %q is not supported (otlp or none)", exp)
	}
	envEndpoint := firstEnv(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if envEndpoint == "" && c.Endpoint == "" {
		return s, false, nil
	}
	s.Protocol = firstEnv(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	if s.Protocol == "" {
		s.Protocol = c.Protocol
	}
	switch s.Protocol {
	case "":
		s.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return s, false, fmt.Errorf("read telemetry protocol: %q is not supported (%s or %s)", s.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if envEndpoint == "" {
		if s.Endpoint, err = endpointURL(c.Endpoint, s.Protocol); err != nil {
			return s, false, err
		}
	}
	if firstEnv(getenv, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS") == "" && len(c.Headers) > 0 {
		s.Headers = c.Headers
	}
	s.Service = c.ServiceName
	if s.Service == "" {
		s.Service = defaultService
	}
	if getenv("OTEL_TRACES_SAMPLER") == "" && c.SampleRatio != nil {
		r := *c.SampleRatio
		if !(r >= 0 && r <= 1) {
			return s, false, fmt.Errorf("read telemetry sample_ratio: %v is not between 0 and 1", r)
		}
		s.SampleRatio = &r
	}
	return s, true, nil
}

// endpointURL checks the file's endpoint and, for http/protobuf, adds the
// traces path to a bare base URL, as OTEL_EXPORTER_OTLP_ENDPOINT does.
func endpointURL(raw, protocol string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse telemetry endpoint: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("parse telemetry endpoint %q: want http://host:port or https://host:port", raw)
	}
	if protocol == ProtocolHTTP && (u.Path == "" || u.Path == "/") {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

func firstEnv(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
