package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// The HTTP sidecar's front door: which Host names it answers, how many
// sessions it keeps, how long an agent may take to send a body, and where
// the upstream's credentials may go.

// Defaults of HTTPHandler's limits.
const (
	// DefaultMaxSessions is HTTPHandler.MaxSessions's default.
	DefaultMaxSessions = 256
	// DefaultMaxChildren is HTTPHandler.MaxChildren's default.
	DefaultMaxChildren = 32
	// DefaultBodyTimeout is HTTPHandler.BodyTimeout's default.
	DefaultBodyTimeout = 30 * time.Second
)

// ErrSessionLimit is the error of a session refused because the sidecar
// holds as many as it may (HTTPHandler.MaxSessions, MaxChildren).
var ErrSessionLimit = errors.New("session limit reached")

// ErrCrossOrigin is the error of an upstream that sent the sidecar to
// another origin (a redirect, or a legacy SSE endpoint): the agent's and
// the configured credentials are never sent there.
var ErrCrossOrigin = errors.New("upstream points to another origin")

// sessionLimit is the number of counted sessions the handler may hold;
// 0 means no limit.
func (h *HTTPHandler) sessionLimit() int {
	n := h.MaxSessions
	if n == 0 {
		n = DefaultMaxSessions
	}
	if h.costlySessions() {
		c := h.MaxChildren
		if c == 0 {
			c = DefaultMaxChildren
		}
		if c > 0 && (n < 0 || c < n) {
			n = c
		}
	}
	return max(n, 0)
}

// reserve takes a session slot, or fails with ErrSessionLimit.
func (h *HTTPHandler) reserve() error {
	limit := h.sessionLimit()
	h.table.mu.Lock()
	defer h.table.mu.Unlock()
	if limit > 0 && h.table.open >= limit {
		what := "sessions"
		if h.costlySessions() {
			what = "sessions (each runs a server process)"
		}
		return fmt.Errorf("%w: %d %s are open; end one (DELETE) or raise --max-sessions/--max-children", ErrSessionLimit, h.table.open, what)
	}
	h.table.open++
	return nil
}

// release gives back a slot taken by reserve.
func (h *HTTPHandler) release() {
	h.table.mu.Lock()
	h.table.open--
	h.table.mu.Unlock()
}

// hostAllowed checks the request's Host header, the guard against DNS
// rebinding: a web page whose name was made to resolve to 127.0.0.1 sends
// its own name as Host. Loopback names (localhost, *.localhost, loopback
// addresses) always pass; AllowedHosts adds names (with or without port);
// without AllowedHosts, AllowRemote accepts any Host (its bearer token is
// the guard then).
func (h *HTTPHandler) hostAllowed(r *http.Request) bool {
	host := r.Host
	name := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		name = hn
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if loopbackHost(name) {
		return true
	}
	for _, a := range h.AllowedHosts {
		if strings.EqualFold(a, host) || strings.EqualFold(a, name) {
			return true
		}
	}
	return h.AllowRemote && len(h.AllowedHosts) == 0
}

// originAllowed reports whether a browser page of origin may use the
// sidecar (DNS rebinding and cross-port guard: every port of 127.0.0.1 is
// another origin, any local web page the user visits among them). It
// passes the sidecar's own origin (the request's Host, or a loopback name
// on the port the request came in on), AllowedOrigins, an origin on
// AllowedHosts that is no loopback name, and with AllowRemote and no
// AllowedHosts any (its bearer token guards then).
func (h *HTTPHandler) originAllowed(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	for _, a := range h.AllowedOrigins {
		if au, err := url.Parse(a); err == nil && sameOriginExactly(au, u) {
			return true
		}
	}
	name, port := strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), portOf(u)
	if ownName, ownPort, err := net.SplitHostPort(r.Host); err == nil {
		if strings.EqualFold(strings.Trim(ownName, "[]"), name) && ownPort == port {
			return true
		}
	} else if strings.EqualFold(strings.Trim(r.Host, "[]"), name) && port == "80" && r.TLS == nil {
		return true
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && loopbackHost(name) {
		if _, lport, err := net.SplitHostPort(local.String()); err == nil && lport == port {
			return true
		}
	}
	if !loopbackHost(name) {
		for _, a := range h.AllowedHosts {
			if strings.EqualFold(a, u.Host) || strings.EqualFold(a, name) {
				return true
			}
		}
	}
	return h.AllowRemote && len(h.AllowedHosts) == 0
}

// sameOriginExactly reports whether a and b are one origin: scheme, host
// and port (an absent port being the scheme's).
func sameOriginExactly(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && portOf(a) == portOf(b) &&
		strings.EqualFold(strings.TrimSuffix(a.Hostname(), "."), strings.TrimSuffix(b.Hostname(), "."))
}

// CheckOrigin checks an origin given to AllowedOrigins: scheme://host with
// an optional port, http or https, and nothing else.
func CheckOrigin(origin string) error {
	u, err := url.Parse(origin)
	switch {
	case err != nil:
		return fmt.Errorf("parse origin %q: %w", origin, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("origin %q: want http://HOST[:PORT] or https://HOST[:PORT]", origin)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("origin %q has no host", origin)
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("origin %q: an origin is scheme://host[:port], nothing more", origin)
	}
	return nil
}

// loopbackHost reports whether a host name is a loopback name or address.
func loopbackHost(name string) bool {
	name = strings.ToLower(name)
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

func (h *HTTPHandler) bodyTimeout() time.Duration {
	if h.BodyTimeout != 0 {
		return h.BodyTimeout
	}
	return DefaultBodyTimeout
}

// bodyDeadline bounds the reading of r's body by BodyTimeout, so that an
// agent trickling a body does not hold a goroutine for ever; the returned
// function lifts the bound once the body is read (a stream answering the
// request may last longer).
func (h *HTTPHandler) bodyDeadline(w http.ResponseWriter) func() {
	d := h.bodyTimeout()
	if d < 0 {
		return func() {}
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
		return func() {}
	}
	return func() { rc.SetReadDeadline(time.Time{}) }
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// sameOrigin reports whether the sidecar may send the upstream's
// credentials to target, having been given from: the same scheme, host and
// port, or an upgrade from http to https on the same host.
func sameOrigin(from, target *url.URL) bool {
	if !strings.EqualFold(from.Hostname(), target.Hostname()) {
		return false
	}
	fs, ts := strings.ToLower(from.Scheme), strings.ToLower(target.Scheme)
	if fs == "http" && ts == "https" {
		return true
	}
	return fs == ts && portOf(from) == portOf(target)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// originOf is u's scheme://host, for messages.
func originOf(u *url.URL) string { return u.Scheme + "://" + u.Host }

// guardRedirects returns a copy of c that follows redirects only within
// the origin of the request that started them (see sameOrigin): Go's
// client drops Authorization and cookies on a redirect to another host, but
// not the custom headers that --upstream-header sets (X-Api-Key…), so such
// a redirect is refused instead, whatever c's own policy.
func guardRedirects(c *http.Client) *http.Client {
	cp := *c
	inner := c.CheckRedirect
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(via[0].URL, req.URL) {
			return fmt.Errorf("%w: redirected from %s to %s; not following", ErrCrossOrigin, originOf(via[0].URL), originOf(req.URL))
		}
		if inner != nil {
			return inner(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cp
}
