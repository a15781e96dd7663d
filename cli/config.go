package cli

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/telemetry"
	"go.yaml.in/yaml/v3"
)

// globals are the options every command takes.
type globals struct {
	home       hindsight.Home
	config     *Config
	configFile string // the file config was read from; "" when none
	quiet      bool   // no progress or informational lines on stderr
	namespace  string // a sidecar's --namespace: where its server's lessons live
	pinTools   bool   // a sidecar's --pin-tools
	// diskReserve is $HINDSIGHT_DISK_RESERVE as a DiskReserve option (see
	// envDiskReserve): 0 when unset.
	diskReserve int64
}

// Config is the YAML configuration file (see configs/hindsight.yaml). Every
// field has a working default; environment variables override the file.
type Config struct {
	Capture struct {
		// Enabled turns recording off when false: the sidecar still
		// relays and injects, but records nothing and opens no outbox.
		// Default true; HINDSIGHT_CAPTURE=off (or on) overrides it.
		Enabled *bool `yaml:"enabled"`
		// QueueOnly (HINDSIGHT_CAPTURE=queue, no file key) records every
		// exchange through capture's queue, owed in the outbox's ledger,
		// rather than journaling it before its answer: for measurements
		// and tests of that path.
		QueueOnly bool `yaml:"-"`
		// MaxBodyBytes truncates stored arguments and results above this
		// size (the original size and SHA-256 are kept).
		MaxBodyBytes int `yaml:"max_body_bytes"`
		// MaxSpillBytes bounds what capture spills to disk, sealed, when it
		// falls behind (default 1 GiB; negative: drop instead of spilling).
		MaxSpillBytes int64 `yaml:"max_spill_bytes"`
		// Redact adds user rules to the built-in redactor.
		Redact struct {
			Keys     []string `yaml:"keys"` // JSON key names whose values are secret
			Patterns []struct {
				Name  string `yaml:"name"`
				Regex string `yaml:"regex"`
			} `yaml:"patterns"`
		} `yaml:"redact"`
	} `yaml:"capture"`
	Outbox struct {
		Retention time.Duration `yaml:"retention"` // keep undelivered steps this long
		// MaxHeldBytes bounds the steps a sidecar holds in memory while
		// its outbox cannot be written (a full disk); past it the newest
		// are dropped and counted (default 32 MiB).
		MaxHeldBytes int `yaml:"max_held_bytes"`
		// DiskReserve is the free space, in bytes, below which sidecars
		// write nothing to their outbox's database (default 32 MiB, or
		// HINDSIGHT_DISK_RESERVE; negative: no check). The daemon keeps
		// 64 MiB (or HINDSIGHT_DISK_RESERVE).
		DiskReserve int64 `yaml:"disk_reserve"`
	} `yaml:"outbox"`
	Daemon struct {
		IdleGap time.Duration `yaml:"idle_gap"` // a task ends after this much quiet
		// MetricsListen serves the daemon's metrics (GET /metrics) over
		// TCP at this address too, e.g. 127.0.0.1:9464 ("": the socket
		// only); --metrics-listen overrides it. An address off loopback
		// is refused unless MetricsAllowRemote is set.
		MetricsListen      string `yaml:"metrics_listen"`
		MetricsAllowRemote bool   `yaml:"metrics_allow_remote"`
	} `yaml:"daemon"`
	UI struct {
		// Listen is the web UI's loopback address (default 127.0.0.1 on
		// a free port, chosen when `hindsight ui` first starts it).
		Listen string `yaml:"listen"`
	} `yaml:"ui"`
	Serve struct {
		// BodyBudget bounds the bytes of request bodies `hindsight serve`
		// holds at once (default 256 MiB; negative: no bound); past it a
		// request gets 503 with Retry-After. --body-budget overrides it.
		BodyBudget int64 `yaml:"body_budget"`
		// AllowedOrigins are browser Origins (scheme://host:port) besides
		// serve's own that may use it, e.g. an inspector's page on another
		// loopback port; --allowed-origin adds to them.
		AllowedOrigins []string `yaml:"allowed_origins"`
	} `yaml:"serve"`
	Store struct {
		Backend  string `yaml:"backend"` // "embedded" (default) or "weaviate"
		Weaviate struct {
			// URL is the HTTP address, e.g. http://127.0.0.1:8080, or a
			// comma-separated list of nodes of one cluster: the first is
			// the node this daemon prefers, the others its failover.
			URL  string `yaml:"url"`
			GRPC string `yaml:"grpc"` // gRPC address, e.g. 127.0.0.1:50051
			// APIKey authenticates to a Weaviate with API-key
			// authentication (HINDSIGHT_WEAVIATE_API_KEY overrides it).
			APIKey string `yaml:"api_key"`
			// ReplicationFactor is the number of copies of each
			// namespace's shard in a Weaviate cluster (at most its
			// nodes; HINDSIGHT_WEAVIATE_REPLICATION overrides it). It is
			// applied when the collection is created and checked against
			// an existing one; 0 (unset) creates with 1 and accepts any.
			ReplicationFactor int `yaml:"replication_factor"`
			// Consistency is the level of reads and writes when the
			// factor is above 1: ONE, QUORUM (default) or ALL.
			Consistency string `yaml:"consistency"`
			// DedupeSweep is the interval of the daemon's sweep for
			// copies of a lesson that daemons sharing the store learnt
			// at the same moment (reflect.Sweeper): 0 means 10 min,
			// negative none.
			DedupeSweep time.Duration `yaml:"dedupe_sweep"`
		} `yaml:"weaviate"`
		Namespace string `yaml:"namespace"`
		// Namespaces maps servers (as named to wrap or serve) to
		// namespaces: lessons about a server listed here are stored in,
		// and injected from, its namespace; the others use Namespace.
		// A team shares one server's lessons through a namespace their
		// daemons all map it to, while an unlisted server's stay in each
		// daemon's own.
		Namespaces map[string]string `yaml:"namespaces"`
	} `yaml:"store"`
	LLM struct {
		BaseURL        string `yaml:"base_url"`
		APIKey         string `yaml:"api_key"`
		Model          string `yaml:"model"`
		EmbedModel     string `yaml:"embed_model"`
		PromptTemplate string `yaml:"prompt_template"` // file; default: the built-in copy of configs/reflect-prompt.tmpl
		CallsPerHour   int    `yaml:"calls_per_hour"`  // cap on reflection's LLM requests (default 120; negative: none)
		TokensPerHour  int    `yaml:"tokens_per_hour"` // cap on reflection's LLM tokens (default 1,000,000; negative: none)
	} `yaml:"llm"`
	Retention struct {
		// Traces purges tasks whose last step is older (default 720h,
		// 30 days; negative: keep); TracesMaxBytes purges the oldest while
		// the trace store is larger (default 2 GiB; negative: no bound).
		Traces         time.Duration `yaml:"traces"`
		TracesMaxBytes int64         `yaml:"traces_max_bytes"`
		// SetAside removes refused steps (outbox/.rejected/) and corrupt
		// outboxes set aside (outbox/.corrupt/, *.corrupt-*) older than
		// this (default 720h; negative: keep).
		SetAside time.Duration `yaml:"set_aside"`
	} `yaml:"retention"`
	Logs struct {
		// MaxBytes rotates a log file past this size (default 10 MiB;
		// negative: never); Keep rotated files are kept (default 3).
		MaxBytes int64 `yaml:"max_bytes"`
		Keep     int   `yaml:"keep"`
		// Rate and Burst limit the lines per second each source (a
		// message and its server, e.g. one server's stderr) may log
		// (defaults 20 and 200; a negative rate: no limit).
		Rate  float64 `yaml:"rate"`
		Burst int     `yaml:"burst"`
	} `yaml:"logs"`
	Inject struct {
		Instructions *bool `yaml:"instructions"`  // lessons in the initialize instructions (default true)
		ErrorResults *bool `yaml:"error_results"` // lessons appended to isError results (default true)
		QueryTool    *bool `yaml:"query_tool"`    // add query_hindsight to tools/list (default true)
		// EndTask lets the agent end its task explicitly with
		// _meta["io.hindsight/final"]: true on a request (default true).
		EndTask *bool `yaml:"end_task"`
		// EndTaskTool adds trigger_hindsight beside query_hindsight
		// (default: as query_tool; off with end_task off).
		EndTaskTool *bool `yaml:"end_task_tool"`
		// SeenOnce appends a lesson seen in one task (below the 0.6 gate)
		// to an error its template fits exactly (default true; never the
		// instructions, never an imported lesson).
		SeenOnce       *bool `yaml:"seen_once"`
		SessionBudget  int   `yaml:"session_budget"`  // tokens injected per session (default 1000)
		MaxExperiences int   `yaml:"max_experiences"` // per query_hindsight answer (default 3)
	} `yaml:"inject"`
	Tools struct {
		// Pin makes sidecars withhold a tool whose definition changed
		// since it was pinned, or whose description fails validation,
		// until `hindsight tools approve` (as --pin-tools does; default
		// false: such tools are only reported).
		Pin *bool `yaml:"pin"`
	} `yaml:"tools"`
	// Telemetry exports a trace span per tool call over OTLP (off unless
	// an endpoint is set here or in OTEL_EXPORTER_OTLP_*ENDPOINT).
	Telemetry telemetry.Config `yaml:"telemetry"`
}

// resolve sets the home and configuration from the --home and --config
// options ("" when not given).
func (g *globals) resolve(home, cfgFile string) error {
	g.home = envHome()
	if home != "" {
		abs, err := filepath.Abs(home)
		if err != nil {
			return fmt.Errorf("resolve home: %w", err)
		}
		g.home = hindsight.Home(abs)
		// Children (the daemon, respawned servers) inherit the choice.
		os.Setenv("HINDSIGHT_HOME", abs)
	}
	path := cfgFile
	if path == "" {
		if _, err := os.Stat(g.home.Path("config.yaml")); err == nil {
			path = g.home.Path("config.yaml")
		}
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	if g.diskReserve, err = envDiskReserve(); err != nil {
		// A typo in the variable must not stop a sidecar (its agent would
		// lose the server): say so, and keep the defaults.
		fmt.Fprintf(os.Stderr, "hindsight: %v; the default reserve is kept\n", err)
		g.diskReserve = 0
	}
	g.config = cfg
	g.configFile = path
	return nil
}

func loadConfig(path string) (*Config, error) {
	cfg := &Config{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(cfg); err != nil && err != io.EOF {
			return nil, fmt.Errorf("parse config %s: %w", path, err)
		}
	}
	cfg.applyEnv()
	if v := os.Getenv("HINDSIGHT_WEAVIATE_REPLICATION"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("read HINDSIGHT_WEAVIATE_REPLICATION: %q is not a replication factor (1 or more)", v)
		}
		cfg.Store.Weaviate.ReplicationFactor = n
	}
	if f := cfg.Store.Weaviate.ReplicationFactor; f < 0 {
		return nil, fmt.Errorf("parse config %s: store.weaviate.replication_factor %d: want 1 or more", path, f)
	}
	if _, err := weaviateURLs(cfg.Store.Weaviate.URL); err != nil {
		return nil, fmt.Errorf("parse config %s: store.weaviate.url (or HINDSIGHT_WEAVIATE_URL): %w", path, err)
	}
	switch strings.ToUpper(cfg.Store.Weaviate.Consistency) {
	case "", "ONE", "QUORUM", "ALL":
	default:
		return nil, fmt.Errorf("parse config %s: store.weaviate.consistency %q: want ONE, QUORUM or ALL", path, cfg.Store.Weaviate.Consistency)
	}
	return cfg, nil
}

// weaviateURLs splits store.weaviate.url, a comma-separated list of REST
// addresses (spaces around the commas allowed), and checks that each is an
// http or https URL with a host. An empty list is no Weaviate.
func weaviateURLs(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var urls []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("read weaviate URL %q: want http(s)://host:port, several separated by commas", s)
		}
		urls = append(urls, s)
	}
	return urls, nil
}

// namespaceFor is the namespace of the lessons about server.
func (c *Config) namespaceFor(server string) string {
	if ns := c.Store.Namespaces[server]; ns != "" {
		return ns
	}
	return c.Store.Namespace
}

// applyEnv lets the environment override the file.
func (c *Config) applyEnv() {
	set := func(dst *string, names ...string) {
		for _, n := range names {
			if v := os.Getenv(n); v != "" {
				*dst = v
				return
			}
		}
	}
	set(&c.LLM.BaseURL, "HINDSIGHT_LLM_BASE_URL", "OPENAI_BASE_URL")
	set(&c.LLM.APIKey, "HINDSIGHT_LLM_API_KEY", "OPENAI_API_KEY")
	set(&c.LLM.Model, "HINDSIGHT_LLM_MODEL")
	set(&c.LLM.EmbedModel, "HINDSIGHT_EMBED_MODEL")
	set(&c.Store.Weaviate.URL, "HINDSIGHT_WEAVIATE_URL")
	set(&c.Store.Weaviate.GRPC, "HINDSIGHT_WEAVIATE_GRPC")
	set(&c.Store.Weaviate.APIKey, "HINDSIGHT_WEAVIATE_API_KEY")
	if v := os.Getenv("HINDSIGHT_CAPTURE"); v != "" {
		if on, ok := parseSwitch(v); ok {
			c.Capture.Enabled = &on
		} else if strings.EqualFold(strings.TrimSpace(v), "queue") {
			on := true
			c.Capture.Enabled, c.Capture.QueueOnly = &on, true
		}
	}
	if c.Store.Weaviate.URL != "" && c.Store.Backend == "" {
		c.Store.Backend = "weaviate"
	}
}

// parseSwitch reads an on/off environment value: on, true, 1, yes or off,
// false, 0, no (any case). ok is false for anything else.
func parseSwitch(v string) (on, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "1", "yes":
		return true, true
	case "off", "false", "0", "no":
		return false, true
	}
	return false, false
}

// outboxReserve is the free space a sidecar's outbox keeps:
// HINDSIGHT_DISK_RESERVE when set, else outbox.disk_reserve (see
// spool.Options.DiskReserve).
func (g *globals) outboxReserve() int64 {
	if g.diskReserve != 0 {
		return g.diskReserve
	}
	return g.config.Outbox.DiskReserve
}

// pinToolsOn reports whether sidecars withhold changed and flagged tools:
// --pin-tools, else tools.pin.
func (g *globals) pinToolsOn() bool {
	return g.pinTools || (g.config.Tools.Pin != nil && *g.config.Tools.Pin)
}

// captureEnabled reports whether sidecars record (capture.enabled, default
// true, overridden by HINDSIGHT_CAPTURE).
func (c *Config) captureEnabled() bool {
	return c.Capture.Enabled == nil || *c.Capture.Enabled
}
