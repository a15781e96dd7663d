package telemetry

import (
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	half, two := 0.5, 2.0
	file := Config{Endpoint: "http://127.0.0.1:4318", Headers: map[string]string{"x-key": "k"}, ServiceName: "svc"}
	tests := []struct {
		name     string
		cfg      Config
		env      map[string]string
		on       bool
		err      string
		protocol string
		endpoint string
		headers  bool
		sampler  bool
		service  string
	}{
		{name: "nothing set: off", cfg: Config{}},
		{name: "file endpoint", cfg: file, on: true, protocol: ProtocolHTTP, endpoint: "http://127.0.0.1:4318/v1/traces", headers: true, service: "svc"},
		{name: "file full traces URL kept", cfg: Config{Endpoint: "https://c.example/otlp/v1/traces"}, on: true, protocol: ProtocolHTTP, endpoint: "https://c.example/otlp/v1/traces", service: "hindsight"},
		{name: "file grpc", cfg: Config{Endpoint: "http://127.0.0.1:4317", Protocol: "grpc"}, on: true, protocol: ProtocolGRPC, endpoint: "http://127.0.0.1:4317", service: "hindsight"},
		{name: "env endpoint alone enables, left to the exporter", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"}, on: true, protocol: ProtocolHTTP, service: "hindsight"},
		{name: "env traces endpoint overrides the file", cfg: file, env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318/v1/traces"}, on: true, protocol: ProtocolHTTP, headers: true, service: "svc"},
		{name: "env protocol overrides the file", cfg: Config{Endpoint: "http://h:4317", Protocol: "http/protobuf"}, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, protocol: ProtocolGRPC, endpoint: "http://h:4317", service: "hindsight"},
		{name: "env headers override the file's", cfg: file, env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, on: true, protocol: ProtocolHTTP, endpoint: "http://127.0.0.1:4318/v1/traces", service: "svc"},
		{name: "SDK disabled", cfg: file, env: map[string]string{"OTEL_SDK_DISABLED": "TRUE"}},
		{name: "exporter none", cfg: file, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "exporter otlp", cfg: file, env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, protocol: ProtocolHTTP, endpoint: "http://127.0.0.1:4318/v1/traces", headers: true, service: "svc"},
		{name: "exporter console refused", cfg: file, env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "http/json refused", cfg: Config{Endpoint: "http://h:4318", Protocol: "http/json"}, err: "protocol"},
		{name: "endpoint without scheme refused", cfg: Config{Endpoint: "127.0.0.1:4318"}, err: "endpoint"},
		{name: "sample ratio", cfg: Config{Endpoint: "http://h:4318", SampleRatio: &half}, on: true, protocol: ProtocolHTTP, endpoint: "http://h:4318/v1/traces", sampler: true, service: "hindsight"},
		{name: "env sampler wins over the ratio", cfg: Config{Endpoint: "http://h:4318", SampleRatio: &half}, env: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, on: true, protocol: ProtocolHTTP, endpoint: "http://h:4318/v1/traces", service: "hindsight"},
		{name: "sample ratio out of range", cfg: Config{Endpoint: "http://h:4318", SampleRatio: &two}, err: "sample_ratio"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, on, err := Resolve(tc.cfg, func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one about %s", err, tc.err)
				}
				return
			}
			if err != nil || on != tc.on {
				t.Fatalf("on %v err %v, want on %v", on, err, tc.on)
			}
			if !on {
				return
			}
			if s.Protocol != tc.protocol || s.Endpoint != tc.endpoint || (s.Headers != nil) != tc.headers || (s.SampleRatio != nil) != tc.sampler || s.Service != tc.service {
				t.Errorf("settings %+v", s)
			}
		})
	}
}
