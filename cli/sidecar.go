package cli

import (
	"fmt"
	"log/slog"

	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/sidecar"
)

// sidecarConfig is the sidecar of the server called name as the
// configuration, the environment and wrap's or serve's flags set it up.
func sidecarConfig(g *globals, name string, logger *slog.Logger) sidecar.Config {
	cfg := sidecar.Config{
		Home:       g.home,
		Server:     name,
		Logger:     logger,
		Redact:     redactRules(g),
		EndTask:    g.config.Inject.EndTask == nil || *g.config.Inject.EndTask,
		Inject:     newInjector(g, name),
		PinTools:   g.pinToolsOn(),
		DaemonArgs: daemonArgs(g),
		// Drains keep HINDSIGHT_DISK_RESERVE, not outbox.disk_reserve.
		DrainReserve: g.diskReserve,
	}
	if g.config.captureEnabled() {
		cfg.Capture = &capture.Options{
			Namespace:     g.namespace,
			MaxBodyBytes:  g.config.Capture.MaxBodyBytes,
			MaxSpillBytes: g.config.Capture.MaxSpillBytes,
			Retention:     g.config.Outbox.Retention,
			MaxHeldBytes:  g.config.Outbox.MaxHeldBytes,
			DiskReserve:   g.outboxReserve(),
			QueueOnly:     g.config.Capture.QueueOnly,
		}
	}
	// Without Backends.Tracing, tracing is off (see tracingElsewhere).
	if trace := backends.Tracing; trace != nil {
		cfg.Tracing = func() (func(*proxy.Exchange), func()) { return trace(g.config.Telemetry, logger) }
	}
	return cfg
}

// redactRules are the user's redaction rules from the configuration.
func redactRules(g *globals) capture.RedactorConfig {
	cfg := capture.RedactorConfig{Keys: g.config.Capture.Redact.Keys}
	for _, p := range g.config.Capture.Redact.Patterns {
		cfg.Patterns = append(cfg.Patterns, capture.Pattern{Name: p.Name, Regex: p.Regex})
	}
	return cfg
}

// newRedactor builds the redactor with the user's rules from the config.
func newRedactor(g *globals) (*capture.Redactor, error) {
	red, err := capture.NewRedactor(redactRules(g))
	if err != nil {
		return nil, fmt.Errorf("redaction rules: %w", err)
	}
	return red, nil
}
