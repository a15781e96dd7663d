// Package openaiembed embeds texts with any OpenAI-compatible /embeddings
// endpoint (OpenAI, Ollama, vLLM…). It lives apart from package embed so
// that binaries without a remote model (the sidecar) do not link the
// OpenAI client.
package openaiembed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Config configures an OpenAI-compatible embeddings client.
type Config struct {
	BaseURL string // e.g. http://127.0.0.1:11434/v1; empty: the client's default (OPENAI_BASE_URL)
	APIKey  string // empty: OPENAI_API_KEY
	Model   string // required (HINDSIGHT_EMBED_MODEL)
	// Dim asks the model for vectors of this size (models that support
	// shortening); 0 keeps the model's own size, learned by a probe at
	// construction.
	Dim int
	// Batch is the number of texts per request (default 128).
	Batch   int
	Timeout time.Duration // per request (default 60 s)
	// MaxRetries for transient errors (default 2).
	MaxRetries int
}

// Embedder embeds texts with an OpenAI-compatible /embeddings endpoint.
type Embedder struct {
	client openai.Client
	cfg    Config
	dim    int
}

// New returns an embeddings client. When cfg.Dim is 0 it embeds a
// probe text to learn the model's dimension, so a wrong URL, key or model
// fails here rather than on first use.
func New(ctx context.Context, cfg Config) (*Embedder, error) {
	if cfg.Model == "" {
		return nil, errors.New("new embedder: model is required")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 128
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 2
	}
	opts := []option.RequestOption{option.WithRequestTimeout(cfg.Timeout), option.WithMaxRetries(cfg.MaxRetries)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	o := &Embedder{client: openai.NewClient(opts...), cfg: cfg, dim: cfg.Dim}
	if o.dim == 0 {
		vs, err := o.embed(ctx, []string{"hindsight dimension probe"})
		if err != nil {
			return nil, fmt.Errorf("new embedder: probe %s: %w", cfg.Model, err)
		}
		o.dim = len(vs[0])
	}
	return o, nil
}

// Name is the model name.
func (o *Embedder) Name() string { return o.cfg.Model }

// Dim is the vector dimension.
func (o *Embedder) Dim() int { return o.dim }

// Embed embeds texts in batches, keeping their order. Every vector must
// have Dim dimensions.
func (o *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for i := 0; i < len(texts); i += o.cfg.Batch {
		vs, err := o.embed(ctx, texts[i:min(i+o.cfg.Batch, len(texts))])
		if err != nil {
			return nil, fmt.Errorf("embed texts: %w", err)
		}
		for _, v := range vs {
			if len(v) != o.dim {
				return nil, fmt.Errorf("embed texts: model %s returned %d dimensions, want %d", o.cfg.Model, len(v), o.dim)
			}
		}
		out = append(out, vs...)
	}
	return out, nil
}

func (o *Embedder) embed(ctx context.Context, texts []string) ([][]float32, error) {
	// Empty input is rejected by the API; a space embeds as "nothing".
	in := make([]string, len(texts))
	for i, t := range texts {
		if t == "" {
			t = " "
		}
		in[i] = t
	}
	p := openai.EmbeddingNewParams{
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: in},
		Model:          openai.EmbeddingModel(o.cfg.Model),
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
	}
	if o.cfg.Dim > 0 {
		p.Dimensions = openai.Int(int64(o.cfg.Dim))
	}
	resp, err := o.client.Embeddings.New(ctx, p)
	if err != nil {
		return nil, err
	}
	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("model %s returned %d embeddings for %d texts", o.cfg.Model, len(resp.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || int(d.Index) >= len(out) || out[d.Index] != nil {
			return nil, fmt.Errorf("model %s returned a bad embedding index %d", o.cfg.Model, d.Index)
		}
		v := make([]float32, len(d.Embedding))
		for k, f := range d.Embedding {
			v[k] = float32(f)
		}
		out[d.Index] = v
	}
	return out, nil
}
