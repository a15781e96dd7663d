package openaiembed_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/embedder/openaiembed"
)

// embeddingsServer speaks the OpenAI embeddings wire format: each text
// becomes a vector of dim values derived from its length.
func embeddingsServer(t *testing.T, dim int, calls *atomic.Int32) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer test-key" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusUnauthorized)
			return
		}
		calls.Add(1)
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Model != "test-embed" {
			http.Error(w, `{"error":{"message":"unknown model"}}`, http.StatusNotFound)
			return
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		}
		resp := struct {
			Object string         `json:"object"`
			Data   []item         `json:"data"`
			Model  string         `json:"model"`
			Usage  map[string]int `json:"usage"`
		}{Object: "list", Model: req.Model, Usage: map[string]int{"prompt_tokens": 1, "total_tokens": 1}}
		// Answer in reverse order: the client must place by index.
		for i := len(req.Input) - 1; i >= 0; i-- {
			v := make([]float64, dim)
			v[len(req.Input[i])%dim] = 1
			resp.Data = append(resp.Data, item{"embedding", i, v})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
	}))
}

func TestOpenAI(t *testing.T) {
	var calls atomic.Int32
	srv := embeddingsServer(t, 8, &calls)
	defer srv.Close()
	ctx := context.Background()
	e, err := openaiembed.New(ctx, openaiembed.Config{BaseURL: srv.URL + "/v1", APIKey: "test-key", Model: "test-embed", Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if e.Dim() != 8 || e.Name() != "test-embed" || store.EmbedderID(e) != "test-embed/8" {
		t.Fatalf("embedder %s dim %d", e.Name(), e.Dim())
	}
	calls.Store(0)
	vs, err := e.Embed(ctx, []string{"a", "bb", "ccc", "", "eeeee"})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 {
		t.Errorf("%d requests for 5 texts in batches of 2, want 3", calls.Load())
	}
	for i, want := range []int{1, 2, 3, 1, 5} {
		if vs[i][want] != 1 {
			t.Errorf("text %d: vector %v, want a 1 at %d", i, vs[i], want)
		}
	}
}

func TestOpenAIErrors(t *testing.T) {
	var calls atomic.Int32
	srv := embeddingsServer(t, 8, &calls)
	defer srv.Close()
	ctx := context.Background()
	for _, cfg := range []openaiembed.Config{
		{BaseURL: srv.URL + "/v1", APIKey: "wrong", Model: "test-embed", MaxRetries: 1},
		{BaseURL: srv.URL + "/v1", APIKey: "test-key", Model: "nope", MaxRetries: 1},
		{BaseURL: srv.URL + "/v1", APIKey: "test-key"},
	} {
		if _, err := openaiembed.New(ctx, cfg); err == nil {
			t.Errorf("NewOpenAI(%+v) succeeded", cfg)
		}
	}
	// A configured dimension that the server does not return is an error.
	e, err := openaiembed.New(ctx, openaiembed.Config{BaseURL: srv.URL + "/v1", APIKey: "test-key", Model: "test-embed", Dim: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Embed(ctx, []string{"x"}); err == nil || !strings.Contains(err.Error(), "dimensions") {
		t.Errorf("dimension mismatch: %v", err)
	}
}
