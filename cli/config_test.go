package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestExampleConfigParses keeps configs/hindsight.yaml true: every key in it
// is one the configuration knows (unknown keys are errors), and its values
// are the defaults it claims.
func TestExampleConfigParses(t *testing.T) {
	t.Setenv("HINDSIGHT_WEAVIATE_URL", "")
	t.Setenv("HINDSIGHT_CAPTURE", "")
	cfg, err := loadConfig(filepath.Join("..", "configs", "hindsight.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Daemon.IdleGap != 10*time.Minute || cfg.Outbox.Retention != 168*time.Hour {
		t.Errorf("idle gap %v, retention %v", cfg.Daemon.IdleGap, cfg.Outbox.Retention)
	}
	if cfg.Store.Backend != "embedded" || cfg.Inject.SessionBudget != 1000 || cfg.Inject.MaxExperiences != 3 {
		t.Errorf("store %q, budget %d, max experiences %d", cfg.Store.Backend, cfg.Inject.SessionBudget, cfg.Inject.MaxExperiences)
	}
	if !cfg.captureEnabled() || cfg.LLM.CallsPerHour != 120 {
		t.Errorf("capture %v, calls per hour %d", cfg.captureEnabled(), cfg.LLM.CallsPerHour)
	}
	if cfg.Retention.Traces != 720*time.Hour || cfg.Retention.TracesMaxBytes != 2<<30 || cfg.Retention.SetAside != 720*time.Hour {
		t.Errorf("retention %+v", cfg.Retention)
	}
	if cfg.Logs.MaxBytes != 10<<20 || cfg.Logs.Keep != 3 || cfg.Logs.Rate != 20 || cfg.Logs.Burst != 200 {
		t.Errorf("logs %+v", cfg.Logs)
	}
}

// TestWeaviateAPIKey: the key comes from the file, and the environment
// overrides it.
func TestWeaviateAPIKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, p, "store:\n  weaviate:\n    url: http://127.0.0.1:8080\n    api_key: from-file\n")
	for _, tc := range []struct{ env, want string }{{"", "from-file"}, {"from-env", "from-env"}} {
		t.Setenv("HINDSIGHT_WEAVIATE_API_KEY", tc.env)
		cfg, err := loadConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Store.Weaviate.APIKey != tc.want || cfg.Store.Backend != "weaviate" {
			t.Errorf("env %q: api key %q backend %q, want %q", tc.env, cfg.Store.Weaviate.APIKey, cfg.Store.Backend, tc.want)
		}
	}
}

// TestWeaviateReplication: the factor and level come from the file, the
// environment overrides the factor, and bad values are errors.
func TestWeaviateReplication(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file, env string
		factor          int
		level           string
		bad             bool
	}{
		{"unset", "", "", 0, "", false},
		{"file", "    replication_factor: 3\n    consistency: ALL\n", "", 3, "ALL", false},
		{"env overrides", "    replication_factor: 3\n", "2", 2, "", false},
		{"bad env", "", "three", 0, "", true},
		{"zero env", "", "0", 0, "", true},
		{"negative", "    replication_factor: -1\n", "", 0, "", true},
		{"bad level", "    consistency: MOST\n", "", 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".yaml")
			writeFile(t, p, "store:\n  weaviate:\n    url: http://127.0.0.1:8080\n"+tc.file)
			t.Setenv("HINDSIGHT_WEAVIATE_REPLICATION", tc.env)
			cfg, err := loadConfig(p)
			if tc.bad {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w := cfg.Store.Weaviate; w.ReplicationFactor != tc.factor || w.Consistency != tc.level {
				t.Errorf("factor %d level %q, want %d %q", w.ReplicationFactor, w.Consistency, tc.factor, tc.level)
			}
		})
	}
}

// TestNamespaceFor: a mapped server's lessons live in its namespace, the
// others in store.namespace.
func TestNamespaceFor(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, p, "store:\n  namespace: mine\n  namespaces:\n    github: team-platform\n")
	cfg, err := loadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	for server, want := range map[string]string{"github": "team-platform", "notes": "mine", "": "mine"} {
		if got := cfg.namespaceFor(server); got != want {
			t.Errorf("namespaceFor(%q) = %q, want %q", server, got, want)
		}
	}
}

func TestConfigRejectsUnknownKeys(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, p, "daemon:\n  idle_gaps: 5m\n")
	if _, err := loadConfig(p); err == nil {
		t.Fatal("a misspelt key was accepted")
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEndTaskTool(t *testing.T) {
	on, off := new(true), new(false)
	for _, tc := range []struct {
		endTask, endTaskTool, queryTool *bool
		want                            bool
	}{
		{nil, nil, nil, true},
		{nil, nil, off, false},
		{nil, on, off, true},
		{nil, off, nil, false},
		{off, on, on, false},
		{on, nil, on, true},
	} {
		if got := endTaskTool(tc.endTask, tc.endTaskTool, tc.queryTool); got != tc.want {
			t.Errorf("endTaskTool(%v, %v, %v) = %v, want %v", tc.endTask, tc.endTaskTool, tc.queryTool, got, tc.want)
		}
	}
}

// TestWeaviateURLs: store.weaviate.url (or HINDSIGHT_WEAVIATE_URL) is a
// comma-separated list, the preferred node first; a bad entry is an error
// that names it.
func TestWeaviateURLs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file, env string
		want            []string
		bad             string
	}{
		{"one", "http://a:8080", "", []string{"http://a:8080"}, ""},
		{"list", "http://a:8080, http://b:8080,https://c:443", "", []string{"http://a:8080", "http://b:8080", "https://c:443"}, ""},
		{"env overrides", "http://a:8080", "http://b:1,http://a:1", []string{"http://b:1", "http://a:1"}, ""},
		{"empty entry", "http://a:8080,,http://b:8080", "", nil, `""`},
		{"no scheme", "http://a:8080,b:8080", "", nil, "b:8080"},
		{"bad env", "http://a:8080", "http://b:1,ftp://c", nil, "ftp://c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".yaml")
			writeFile(t, p, "store:\n  weaviate:\n    url: \""+tc.file+"\"\n")
			t.Setenv("HINDSIGHT_WEAVIATE_URL", tc.env)
			cfg, err := loadConfig(p)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("err %v, want one naming %s", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := weaviateURLs(cfg.Store.Weaviate.URL)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("urls %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

func FuzzWeaviateURLs(f *testing.F) {
	for _, s := range []string{"", "http://a:8080", "http://a:1, https://b:2", "a,,b", " , ", "http://[::1]:8080,http://%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		urls, err := weaviateURLs(list)
		if err != nil {
			return
		}
		if strings.TrimSpace(list) != "" && len(urls) != strings.Count(list, ",")+1 {
			t.Fatalf("%q: %d URLs", list, len(urls))
		}
		for _, u := range urls {
			if _, err := weaviateURLs(u); err != nil || strings.Contains(u, ",") {
				t.Fatalf("%q: entry %q does not read back: %v", list, u, err)
			}
		}
	})
}
