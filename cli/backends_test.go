package cli

import (
	"context"
	"strings"
	"testing"
)

func TestBackendsMissing(t *testing.T) {
	cases := []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"embedded default", func(c *Config) {}, ""},
		{"weaviate", func(c *Config) { c.Store.Backend = "weaviate" }, "Weaviate"},
		{"embeddings model", func(c *Config) { c.LLM.EmbedModel = "nomic-embed-text" }, "embeddings"},
		{"llm", func(c *Config) { c.LLM.Model = "gpt-4o-mini" }, "LLM"},
	}
	for _, tc := range cases {
		c := &Config{}
		tc.edit(c)
		got := Backends{}.missing(c)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: lean build misses %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestDaemonNeedsFullBuild checks that the lean build, asked to run a
// daemon with an LLM and no hindsightd to hand the work to, fails at once
// with an error that says what to install.
func TestDaemonNeedsFullBuild(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	prev := backends
	backends = Backends{}
	t.Cleanup(func() { backends = prev })
	g := &globals{config: &Config{}}
	g.config.LLM.Model = "gpt-4o-mini"
	err := runDaemon(context.Background(), g, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "hindsightd") || !strings.Contains(err.Error(), "LLM") {
		t.Fatalf("runDaemon = %v, want an error naming hindsightd and the LLM", err)
	}
}
