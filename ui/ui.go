// Package ui is Hindsight's web UI: server-rendered pages over the
// daemon's API (tasks on a timeline with their steps, experiences to
// search, edit, pin, forget, restore and purge). The daemon serves it on a
// loopback TCP port; `hindsight ui` starts or finds it.
//
// Every request needs the token of this start, or a browser session begun
// with it: the URL the daemon hands out carries the token as ?token=,
// which the first page load exchanges for a session id in a cookie (the
// token itself is never a cookie: browsers send a 127.0.0.1 cookie to
// every port); scripts may send the token as the X-Hindsight-Token header.
// The Host header must name loopback (against DNS rebinding), and a
// state-changing request must be a POST with its session's form value
// (or the token header) and an Origin or Referer of the UI itself
// (against cross-site requests).
package ui

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/internal/httpserve"
)

//go:embed templates/*.html static/*
var files embed.FS

// TokenHeader is the header that may carry the token instead of the cookie.
const TokenHeader = "X-Hindsight-Token"

// Server is the web UI's handler.
type Server struct {
	Daemon *daemon.Client // the API the pages read and change
	Token  string         // the token every request must carry
	Logger *slog.Logger

	once     sync.Once
	mux      *http.ServeMux
	pages    map[string]*template.Template
	sessions sessions
}

// sessionKey is the request context's key of the browser session, if any.
type sessionKey struct{}

// NewToken returns a fresh random token.
func NewToken() string { return randomHex() }

func (s *Server) init() {
	s.once.Do(func() {
		if s.Logger == nil {
			s.Logger = slog.Default()
		}
		s.pages = parsePages()
		static, _ := fs.Sub(files, "static")
		m := http.NewServeMux()
		m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
		m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/tasks", http.StatusSeeOther)
		})
		m.HandleFunc("GET /tasks", s.handleTasks)
		m.HandleFunc("GET /tasks/{id}", s.handleTask)
		m.HandleFunc("GET /experiences", s.handleExperiences)
		m.HandleFunc("GET /experiences/{id}", s.handleExperience)
		m.HandleFunc("POST /experiences/{id}/edit", s.handleEdit)
		m.HandleFunc("POST /experiences/{id}/forget", s.handleForget)
		m.HandleFunc("POST /experiences/{id}/restore", s.handleRestore)
		m.HandleFunc("POST /experiences/{id}/purge", s.handlePurge)
		m.HandleFunc("POST /experiences/{id}/pin", s.handlePin)
		m.HandleFunc("GET /tools", s.handleTools)
		m.HandleFunc("POST /tools/approve", s.handleApproveTool)
		s.mux = m
	})
}

// cookieName is the session's cookie; cookies ignore ports, so the name
// carries the port of the UI it belongs to.
func cookieName(host string) string {
	_, port, _ := net.SplitHostPort(host)
	return "hindsight_ui_" + port
}

func (s *Server) tokenOK(t string) bool { return equal(t, s.Token) }

// ServeHTTP checks the Host, the token or session and, for a POST, the
// origin and the form's session value, then serves the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if !daemon.IsLoopbackHost(host) {
		http.Error(w, "forbidden: the UI answers loopback host names only", http.StatusForbidden)
		return
	}
	if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet {
		if !s.tokenOK(t) {
			http.Error(w, "forbidden: wrong token; open the URL that `hindsight ui` prints", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: cookieName(r.Host), Value: s.sessions.begin(), Path: "/",
			MaxAge: int(sessionMax / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q := r.URL.Query()
		q.Del("token")
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return
	}
	var sess *session
	if tok := r.Header.Get(TokenHeader); tok != "" {
		if !s.tokenOK(tok) {
			http.Error(w, "forbidden: wrong token in "+TokenHeader, http.StatusForbidden)
			return
		}
	} else if c, err := r.Cookie(cookieName(r.Host)); err == nil {
		sess = s.sessions.use(c.Value)
	}
	if sess == nil && r.Header.Get(TokenHeader) == "" {
		http.Error(w, "forbidden: no session, or it expired; open the URL that `hindsight ui` prints", http.StatusForbidden)
		return
	}
	if sess != nil {
		r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess))
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := s.checkPost(r, sess); err != nil {
			http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// checkPost accepts a state-changing request only as a POST from the UI's
// own pages: its Origin (else its Referer) is this UI, and its form
// carries its session's value (or a header the token).
func (s *Server) checkPost(r *http.Request, sess *session) error {
	if r.Method != http.MethodPost {
		return fmt.Errorf("method %s not allowed", r.Method)
	}
	self := "http://" + r.Host
	origin := r.Header.Get("Origin")
	if origin == "" {
		if ref, err := url.Parse(r.Header.Get("Referer")); err == nil && ref.Host != "" {
			origin = ref.Scheme + "://" + ref.Host
		}
	}
	if origin != self {
		return fmt.Errorf("cross-origin request (origin %q)", origin)
	}
	if sess == nil {
		return nil // the token header was checked
	}
	r.Body = http.MaxBytesReader(nil, r.Body, 1<<20)
	if !equal(r.PostFormValue("csrf"), sess.csrf) {
		return fmt.Errorf("the form carries no valid session value; reload the page")
	}
	return nil
}

// Launcher starts the UI on first use and keeps it until the daemon stops.
type Launcher struct {
	Addr   string         // loopback listen address; "" is 127.0.0.1 on a free port
	Daemon *daemon.Client // what the UI's pages speak to
	Logger *slog.Logger
	Ctx    context.Context // the daemon's lifetime: the UI stops with it

	mu  sync.Mutex
	url string
}

// URL starts the UI unless it runs and returns its URL with the token of
// this start.
func (l *Launcher) URL(context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.url != "" {
		return l.url, nil
	}
	ln, err := daemon.ListenTCP(l.Addr, false)
	if err != nil {
		return "", fmt.Errorf("start web ui: %w", err)
	}
	logger := l.Logger
	if logger == nil {
		logger = slog.Default()
	}
	srv := &Server{Daemon: l.Daemon, Token: NewToken(), Logger: logger}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	ctx := l.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	go func() {
		if err := httpserve.Serve(ctx, hs, ln); err != nil {
			logger.Error("web ui stopped", "err", err)
		}
	}()
	addr := ln.Addr().(*net.TCPAddr)
	l.url = "http://" + net.JoinHostPort(addr.IP.String(), fmt.Sprint(addr.Port)) + "/?token=" + srv.Token
	logger.Info("web ui started", "addr", ln.Addr().String())
	return l.url, nil
}
