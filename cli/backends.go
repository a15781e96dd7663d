package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/reflect"
	"github.com/hindsight-proxy/hindsight/telemetry"
)

// Backends are the optional parts whose client libraries are large: the
// Weaviate store, everything that speaks to an OpenAI-compatible endpoint,
// and the OTLP trace exporters (gRPC and protobuf). Every package a binary
// links costs each of its processes memory at start-up and its first
// build time, so the sidecar binary (cmd/hindsight) leaves them out and
// the full build (cmd/hindsightd) supplies them. A nil field means "not in
// this build".
type Backends struct {
	// Weaviate opens the Weaviate experience store that cfg names, with
	// vectors from emb.
	Weaviate func(ctx context.Context, cfg WeaviateConfig, emb hindsight.Embedder, logger *slog.Logger) (hindsight.ExperienceStore, error)
	// Embedder connects to the embeddings model of an OpenAI-compatible
	// endpoint; it fails when the model does not answer.
	Embedder func(ctx context.Context, baseURL, apiKey, model string) (hindsight.Embedder, error)
	// LLM returns the reflector that asks a language model.
	LLM func(cfg LLMConfig) (reflect.Reflector, error)
	// Tracing starts exporting a span per tools/call as cfg and the
	// environment say (otlp.Start): hook is nil when tracing is off or
	// could not start, and shutdown flushes.
	Tracing func(cfg telemetry.Config, logger *slog.Logger) (hook func(*proxy.Exchange), shutdown func())
}

// WeaviateConfig is where Backends.Weaviate connects.
type WeaviateConfig struct {
	URL string // REST
	// Failover lists the REST addresses of the cluster's other nodes,
	// tried in order when URL cannot be reached (store.weaviate.url's
	// entries after the first).
	Failover []string
	GRPC     string // host:port; "" derives it from URL
	// APIKey, when set, is sent as a bearer token (Weaviate's API-key
	// authentication).
	APIKey string
	// ReplicationFactor and Consistency are store.weaviate's (see
	// Config): 0 and "" leave the defaults.
	ReplicationFactor int
	Consistency       string
}

// LLMConfig is what Backends.LLM builds a reflector from.
type LLMConfig struct {
	BaseURL, APIKey, Model string
	PromptTemplate         string // file; "" means the built-in prompt
	CallsPerHour           int
	TokensPerHour          int
	Redactor               reflect.Redactor
	Logger                 *slog.Logger
	Metrics                *reflect.Metrics
}

// backends are those of the running binary, set by Main.
var backends Backends

// FullBinary is the name of the build with every backend. The sidecar build
// replaces itself with it when asked to run a daemon whose configuration
// needs a backend it lacks.
const FullBinary = "hindsightd"

// missing names the first part of c that b cannot provide, or returns "".
func (b Backends) missing(c *Config) string {
	switch {
	case c.Store.Backend == "weaviate" && b.Weaviate == nil:
		return "the Weaviate store"
	case c.LLM.EmbedModel != "" && b.Embedder == nil:
		return "an embeddings model (llm.embed_model)"
	case c.LLM.Model != "" && b.LLM == nil:
		return "an LLM reflector (llm.model)"
	}
	return ""
}

// tracingElsewhere replaces a sidecar of a build without Backends.Tracing
// with FullBinary when the configuration or the environment turns tracing
// on. When FullBinary cannot be found, or tracing is misconfigured, it logs
// why tracing is off and returns: tracing never costs the agent its server.
func tracingElsewhere(c telemetry.Config, logger *slog.Logger) {
	if backends.Tracing != nil {
		return
	}
	_, on, err := telemetry.Resolve(c, os.Getenv)
	if err == nil && on {
		err = execFull("OTLP trace export (telemetry)")
	}
	if err != nil {
		logger.Error("tracing is off", "err", err)
	}
}

// execFull replaces the process with FullBinary, run with the same
// arguments and environment, because the configuration needs what (a
// backend this build lacks). It returns only on failure.
func execFull(what string) error {
	path, err := findFull()
	if err != nil {
		return fmt.Errorf("configuration needs %s, which only %s has: %w", what, FullBinary, err)
	}
	args := append([]string{path}, os.Args[1:]...)
	if err := execReplace(path, args, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}

// findFull looks for FullBinary beside the running executable, then on
// PATH.
func findFull() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		p := filepath.Join(filepath.Dir(exe), FullBinary+exeSuffix)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && isExecutable(st) {
			return p, nil
		}
	}
	p, err := exec.LookPath(FullBinary)
	if err != nil {
		return "", fmt.Errorf("%s is neither beside %s nor on PATH (install it: go install github.com/hindsight-proxy/hindsight/cmd/%s)", FullBinary, exe, FullBinary)
	}
	return p, nil
}
