package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/sidecar"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// headerFlags collects repeated --upstream-header 'K: V' options.
type headerFlags struct{ h http.Header }

func (f *headerFlags) String() string { return "" }

func (f *headerFlags) Type() string { return "header" }

func (f *headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(k, strings.TrimSpace(val))
	return nil
}

// serveOptions is the parsed command line of `hindsight serve`.
type serveOptions struct {
	listen      string
	upstream    string
	transport   string
	name        string
	namespace   string
	authToken   string
	allowRemote bool
	headers     http.Header
	command     []string
	// The front door's limits (see proxy.HTTPHandler).
	allowedHosts []string
	maxSessions  int
	maxChildren  int
	bodyTimeout  time.Duration
	replayEvents int
	replayAge    time.Duration
	sessionIdle  time.Duration
	// bodyBudget bounds the request bodies in flight (0: the
	// configuration's serve.body_budget, else the default).
	bodyBudget int64
	// allowedOrigins are the browser Origins besides serve's own that may
	// use it (with the configuration's serve.allowed_origins).
	allowedOrigins []string
	pinTools       bool
}

// listFlags collects a repeated string option.
type listFlags []string

func (f *listFlags) String() string { return strings.Join(*f, ",") }
func (f *listFlags) Type() string   { return "host" }

func (f *listFlags) Set(v string) error {
	*f = append(*f, v)
	return nil
}

func serveCmd(g *globals) *cobra.Command {
	c := leaf("serve --listen ADDR (--upstream URL | -- CMD [ARGS…]) [options]", "HTTP sidecar: Streamable HTTP at /mcp, legacy SSE at /sse",
		"  hindsight serve --upstream http://127.0.0.1:8080/mcp\n  hindsight serve --listen 127.0.0.1:8931 -- node server.js --stdio")
	check := serveFlags(c.Flags())
	return runs(c, func(ctx context.Context, _ *pflag.FlagSet, cmdline []string) error {
		o, err := check(cmdline)
		if err != nil {
			return err
		}
		return runServe(ctx, g, o)
	})
}

// parseServe parses serve's command line (after "serve").
func parseServe(args []string) (*serveOptions, error) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	check := serveFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return check(fs.Args())
}

// serveFlags declares serve's flags on fs and returns the function that
// checks them, given the server's command line.
func serveFlags(fs *pflag.FlagSet) func(command []string) (*serveOptions, error) {
	// The server's command line is the child's whole: flags stop at the
	// first argument that is not one of serve's, or at --.
	fs.SetInterspersed(false)
	o := &serveOptions{}
	var hdr headerFlags
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8931", "address to serve on (loopback unless --allow-remote)")
	fs.StringVar(&o.upstream, "upstream", "", "URL of the MCP server (or give a command after --)")
	fs.StringVar(&o.transport, "upstream-transport", proxy.TransportAuto, "auto, streamable-http or sse")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of this server's lessons (stored and injected), overriding store.namespaces")
	fs.StringVar(&o.name, "name", "", "the server's name in traces and logs (default: from the URL or command)")
	fs.StringVar(&o.authToken, "auth-token", os.Getenv("HINDSIGHT_AUTH_TOKEN"), "bearer token agents must present (default $HINDSIGHT_AUTH_TOKEN); the agent's Authorization is then not forwarded")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "allow listening on a non-loopback address (requires --auth-token)")
	fs.Var(&hdr, "upstream-header", "'Name: value' sent to the upstream on every request (repeatable)")
	var hosts listFlags
	fs.Var(&hosts, "allowed-host", "a Host header value agents may use besides loopback names (repeatable; default: loopback names only, or any with --allow-remote)")
	fs.IntVar(&o.maxSessions, "max-sessions", proxy.DefaultMaxSessions, "sessions open at once; more are refused with a JSON-RPC error (<0: no bound)")
	fs.IntVar(&o.maxChildren, "max-children", proxy.DefaultMaxChildren, "with a command upstream, server processes (one per session) at once (<0: only --max-sessions)")
	fs.DurationVar(&o.bodyTimeout, "body-timeout", proxy.DefaultBodyTimeout, "how long an agent may take to send one request body")
	fs.IntVar(&o.replayEvents, "replay-events", proxy.DefaultReplayEvents, "recent events kept per stream the sidecar originates (command or legacy SSE upstream), for Last-Event-ID (<0: none, no event ids)")
	fs.DurationVar(&o.replayAge, "replay-age", proxy.DefaultReplayAge, "how long those events are kept for a resume")
	fs.DurationVar(&o.sessionIdle, "session-idle", proxy.DefaultIdleTimeout, "a session with no request and no open stream this long is ended and its slot freed (an agent that crashed never says goodbye; <0: never)")
	fs.Int64Var(&o.bodyBudget, "body-budget", 0, "bytes of request bodies in flight at once; past it a request is refused with 503 and Retry-After (default: serve.body_budget, else 256 MiB; <0: no bound)")
	fs.BoolVar(&o.pinTools, "pin-tools", false, pinToolsUsage)
	var origins listFlags
	fs.Var(&origins, "allowed-origin", "a browser Origin (scheme://host:port) besides serve's own that may use it, such as an inspector's page on another port (repeatable; adds to serve.allowed_origins)")
	return func(command []string) (*serveOptions, error) {
		o.allowedOrigins = origins
		return o.check(hdr, hosts, command)
	}
}

// check completes o with the repeated flags and the command, and checks
// the whole.
func (o *serveOptions) check(hdr headerFlags, hosts listFlags, command []string) (*serveOptions, error) {
	o.headers, o.command, o.allowedHosts = hdr.h, command, hosts
	switch {
	case o.upstream == "" && len(o.command) == 0:
		return nil, fmt.Errorf("%w: serve needs --upstream URL or a command after --", errUsage)
	case o.upstream != "" && len(o.command) > 0:
		return nil, fmt.Errorf("%w: serve takes --upstream or a command, not both", errUsage)
	}
	switch o.transport {
	case proxy.TransportAuto, proxy.TransportStreamable, proxy.TransportSSE:
	default:
		return nil, fmt.Errorf("%w: --upstream-transport must be auto, streamable-http or sse, not %q", errUsage, o.transport)
	}
	if o.upstream != "" {
		u, err := url.Parse(o.upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: --upstream must be an http(s) URL, not %q", errUsage, o.upstream)
		}
		if o.name == "" {
			o.name = u.Hostname()
		}
	} else if o.name == "" {
		o.name = filepath.Base(o.command[0])
	}
	if !o.allowRemote && !isLoopback(o.listen) {
		return nil, fmt.Errorf("%w: refusing to listen on %s, which is not a loopback address: the sidecar relays your agent's credentials; pass --allow-remote and --auth-token to expose it", errUsage, o.listen)
	}
	for _, origin := range o.allowedOrigins {
		if err := proxy.CheckOrigin(origin); err != nil {
			return nil, fmt.Errorf("%w: --allowed-origin: %v", errUsage, err)
		}
	}
	if o.allowRemote && o.authToken == "" {
		return nil, fmt.Errorf("%w: --allow-remote needs --auth-token (or $HINDSIGHT_AUTH_TOKEN): a sidecar beyond loopback without one relays anyone's requests with your upstream's credentials", errUsage)
	}
	return o, nil
}

// isLoopback reports whether addr (host:port) binds to loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// runServe is `hindsight serve`: the HTTP sidecar.
func runServe(ctx context.Context, g *globals, o *serveOptions) error {
	o.name = redactName(g, o.name)
	logger, logFile, err := openLog(g, "serve-"+o.name)
	if err != nil {
		return err
	}
	defer logFile.Close()
	slog.SetDefault(logger) // libraries' logs (and net/http's) go through the redactor into the file too
	tracingElsewhere(g.config.Telemetry, logger)
	stopProfiles, err := startProfiles(logger)
	if err != nil {
		return err
	}
	defer stopProfiles()
	g.namespace = o.namespace
	g.pinTools = o.pinTools
	for _, origin := range g.config.Serve.AllowedOrigins {
		if err := proxy.CheckOrigin(origin); err != nil {
			return fmt.Errorf("read config: serve.allowed_origins: %w", err)
		}
	}
	if o.bodyBudget == 0 {
		o.bodyBudget = g.config.Serve.BodyBudget
	}
	target := o.upstream
	if target == "" {
		target = strings.Join(o.command, " ")
	}
	if red, err := logRedactor(g); err == nil {
		target, _ = red.RedactString(target) // a URL or command line may carry a secret
	}
	front := &proxy.HTTPHandler{
		TaskID: envTaskID(), AuthToken: o.authToken, AllowRemote: o.allowRemote,
		AllowedHosts: o.allowedHosts, MaxSessions: o.maxSessions, MaxChildren: o.maxChildren,
		BodyTimeout: o.bodyTimeout, ReplayEvents: o.replayEvents, ReplayAge: o.replayAge,
		IdleTimeout: o.sessionIdle, BodyBudget: o.bodyBudget, AllowedOrigins: append(o.allowedOrigins, g.config.Serve.AllowedOrigins...),
	}
	return sidecar.Serve(ctx, sidecarConfig(g, o.name, logger), sidecar.HTTP{
		Listen: o.listen, Front: front, Command: o.command,
		URL: o.upstream, UpstreamTransport: o.transport, Header: o.headers, Target: target,
		Ready: func(addr net.Addr) {
			g.info("hindsight serve: %s on http://%s/mcp (legacy SSE at /sse) → %s", o.name, addr, target)
		},
	})
}
