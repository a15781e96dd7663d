// Command hindsightd is hindsight with every backend: the same commands as
// hindsight, plus the Weaviate experience store, the clients of
// OpenAI-compatible endpoints (LLM reflection, embeddings) and the OTLP
// trace exporters. "hindsight daemon" runs it in its place when the
// configuration needs one of the first two, and a sidecar (wrap, serve)
// when tracing is on; install it beside hindsight.
package main

import (
	"context"
	"log/slog"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/cli"
	"github.com/hindsight-proxy/hindsight/reflect"
	"github.com/hindsight-proxy/hindsight/reflect/llm"
	"github.com/hindsight-proxy/hindsight/store/embedder/openaiembed"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
	"github.com/hindsight-proxy/hindsight/telemetry/otlp"
)

func main() {
	cli.Main(cli.Backends{
		Weaviate: func(ctx context.Context, c cli.WeaviateConfig, emb hindsight.Embedder, logger *slog.Logger) (hindsight.ExperienceStore, error) {
			return weaviate.Open(ctx, weaviate.Config{URL: c.URL, Failover: c.Failover, GRPC: c.GRPC, APIKey: c.APIKey, Logger: logger,
				ReplicationFactor: c.ReplicationFactor, Consistency: c.Consistency}, emb)
		},
		Embedder: func(ctx context.Context, baseURL, apiKey, model string) (hindsight.Embedder, error) {
			return openaiembed.New(ctx, openaiembed.Config{BaseURL: baseURL, APIKey: apiKey, Model: model})
		},
		LLM: func(c cli.LLMConfig) (reflect.Reflector, error) {
			return llm.New(llm.Config{
				BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model,
				PromptTemplate: c.PromptTemplate,
				CallsPerHour:   c.CallsPerHour, TokensPerHour: c.TokensPerHour,
				Redactor: c.Redactor, Logger: c.Logger, Metrics: c.Metrics,
			})
		},
		Tracing: otlp.Start,
	})
}
