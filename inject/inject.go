// Package inject gives an agent what Hindsight learned, in small, marked and
// bounded doses: a query_hindsight tool answered by the sidecar, a few lines
// of lessons appended to the server's instructions, and a short lessons
// block appended to failed tool results.
//
// An Injector works on the raw JSON of the results the proxy hands it: it
// adds its text and leaves every other byte as the server sent it. It never
// touches structuredContent, never turns a daemon failure into a protocol
// error, and never holds a response longer than the proxy's hook timeout.
package inject

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
)

// Searcher finds the experiences that matter for a query. The daemon's
// client implements it.
type Searcher interface {
	Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error)
}

// Defaults of the Injector's caps.
const (
	DefaultSessionBudget         = 1000 // tokens injected per session, all channels together
	DefaultMaxExperiences        = 3    // per query_hindsight answer
	DefaultMaxTokensPerLesson    = 200  // per experience in a query_hindsight answer
	DefaultMaxTokensPerLine      = 80   // per lesson line in the instructions or on an error result
	DefaultMaxErrorLessons       = 2    // per failed tool result
	DefaultMaxInstructionLessons = 3    // in the initialize instructions
	DefaultQueryTimeout          = 2 * time.Second
	// DefaultMinConfidence is the injection gate: the confidence an
	// experience needs to reach the instructions or an error result
	// unasked (reflect.DefaultInjectConfidence: two supporting tasks, or
	// one that the error text itself grounds).
	DefaultMinConfidence = 0.6
	// DefaultTemplateMatch is how well an error must fit an experience's
	// error template for its lesson to be appended to that error: the
	// share of the template's literal words found at their places in the
	// masked error text (errtemplate.Similarity), with as many words.
	DefaultTemplateMatch = 0.8
	DefaultLessonsTTL    = 30 * time.Second
)

// retryFailed is how soon a failed lessons search is tried again (the
// daemon may have been starting).
const retryFailed = 500 * time.Millisecond

// QueryToolName is the name of the tool the Injector adds, unless the server
// already has a tool of that name (then a suffix is added: query_hindsight_2…).
const QueryToolName = "query_hindsight"

// FinalMetaKey is the _meta member of a request that says the agent's task
// is finished with it (value true): the sidecar tells the daemon, which
// makes the task final and reflects it without waiting for the idle gap.
const FinalMetaKey = "io.hindsight/final"

// endTaskHint is the sentence of the instructions about FinalMetaKey.
const endTaskHint = `When your task is finished, set "_meta": {"` + FinalMetaKey + `": true} in the params of your last request so its lessons are learned at once.`

// endTaskToolHint is the instructions' sentence with EndTaskTool.
const endTaskToolHint = `When your task is finished, call ` + EndToolName + ` (or set "_meta": {"` + FinalMetaKey + `": true} in the params of your last request) so its lessons are learned at once.`

// Injection channels, as recorded in hindsight.Injection.Channel.
const (
	ChannelInstructions = "instructions"
	ChannelErrorResult  = "error_result"
	ChannelQuery        = "query_hindsight"
)

// An Injector adds Hindsight's lessons to one sidecar's traffic. Set its
// fields before Install; the zero value of every field but Source is a
// working default with all channels on.
type Injector struct {
	// Source answers searches; usually the daemon's client.
	Source Searcher
	// Server is the wrapped server's name, for Prefetch. Sessions carry
	// their own.
	Server string
	// Namespace of the experiences; "" means hindsight.DefaultNamespace.
	Namespace string

	// NoInstructions, NoErrorResults and NoQueryTool switch a channel off.
	NoInstructions bool
	NoErrorResults bool
	NoQueryTool    bool
	// EndTaskHint adds to the instructions one sentence telling the agent
	// how to end its task explicitly (FinalMetaKey): the sidecar acts on
	// the flag when it is set.
	EndTaskHint bool
	// EndTaskTool adds the trigger_hindsight tool (EndToolName) beside
	// query_hindsight, answered by the sidecar, and says so in the
	// instructions (instead of EndTaskHint's sentence, in one sentence
	// with it).
	EndTaskTool bool

	SessionBudget         int           // 0: DefaultSessionBudget
	MaxExperiences        int           // 0: DefaultMaxExperiences
	MaxTokensPerLesson    int           // 0: DefaultMaxTokensPerLesson
	MaxTokensPerLine      int           // 0: DefaultMaxTokensPerLine
	MaxErrorLessons       int           // 0: DefaultMaxErrorLessons
	MaxInstructionLessons int           // 0: DefaultMaxInstructionLessons
	QueryTimeout          time.Duration // bounds a query_hindsight search; 0: DefaultQueryTimeout
	MinConfidence         float64       // injection gate of the instructions and error results; 0: DefaultMinConfidence
	TemplateMatch         float64       // relevance gate of error results; 0: DefaultTemplateMatch
	LessonsTTL            time.Duration // how long prefetched lessons stay fresh; 0: DefaultLessonsTTL

	Logger *slog.Logger // nil: slog.Default()

	mu       sync.Mutex
	sessions map[weak.Pointer[proxy.Session]]*session
	lessons  map[string]*lessonsFetch // by server
}

// session is what the Injector keeps per proxy session.
type session struct {
	mu       sync.Mutex
	spent    int             // tokens injected so far
	toolName string          // this session's name for query_hindsight
	endTool  bool            // trigger_hindsight was listed
	seen     map[string]bool // upstream tool names of the listing in progress
	// pending holds injections made by hooks that do not see the
	// Exchange, to be recorded on it by the Exchange hook: the
	// instructions, keyed by method, and query_hindsight answers, keyed
	// by their params.
	pending map[string][]hindsight.Injection
}

// lessonsFetch is one search for a server's top lessons.
type lessonsFetch struct {
	done    chan struct{} // closed when the search ended
	at      time.Time
	list    []hindsight.ScoredExperience
	err     error
	refresh bool // a refresh is under way
}

// Install sets the Injector's hooks on h: Initialize, ToolsList, ToolCall
// and ToolResult, and wraps h.Exchange (set it first) so what was injected
// is recorded on the exchange that carried it.
func (in *Injector) Install(h *proxy.Hooks) {
	h.Initialize = in.Initialize
	h.ToolsList = in.ToolsList
	h.ToolCall = in.ToolCall
	h.ToolResult = in.ToolResult
	next := h.Exchange
	h.Exchange = func(ex *proxy.Exchange) {
		in.Record(ex)
		if next != nil {
			next(ex)
		}
	}
}

func (in *Injector) logger() *slog.Logger {
	if in.Logger != nil {
		return in.Logger
	}
	return slog.Default()
}

func orDefault[T int | time.Duration | float64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (in *Injector) namespace() string {
	if in.Namespace != "" {
		return in.Namespace
	}
	return hindsight.DefaultNamespace
}

// state returns the Injector's record of s, creating it. Records go away
// with their sessions.
func (in *Injector) state(s *proxy.Session) *session {
	key := weak.Make(s)
	in.mu.Lock()
	defer in.mu.Unlock()
	if st := in.sessions[key]; st != nil {
		return st
	}
	if in.sessions == nil {
		in.sessions = make(map[weak.Pointer[proxy.Session]]*session)
	}
	st := &session{toolName: QueryToolName}
	in.sessions[key] = st
	runtime.AddCleanup(s, func(k weak.Pointer[proxy.Session]) {
		in.mu.Lock()
		delete(in.sessions, k)
		in.mu.Unlock()
	}, key)
	return st
}

// Spent returns the tokens injected so far in session s.
func (in *Injector) Spent(s *proxy.Session) int {
	st := in.state(s)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.spent
}

// remaining returns the session's unspent budget.
func (st *session) remaining(budget int) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return budget - st.spent
}

// spend charges n tokens to the session if they fit, and reports whether
// they did.
func (st *session) spend(n, budget int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.spent+n > budget {
		return false
	}
	st.spent += n
	return true
}

func (st *session) queryTool() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.toolName
}

func (st *session) addPending(key string, inj hindsight.Injection) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pending == nil {
		st.pending = make(map[string][]hindsight.Injection)
	}
	st.pending[key] = append(st.pending[key], inj)
}

func (st *session) takePending(key string) (hindsight.Injection, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.pending[key]
	if len(q) == 0 {
		return hindsight.Injection{}, false
	}
	inj := q[0]
	if len(q) == 1 {
		delete(st.pending, key)
	} else {
		st.pending[key] = q[1:]
	}
	return inj, true
}

// Record adds to ex.Injected what the Initialize and query_hindsight hooks
// injected for it. Install calls it from the Exchange hook.
func (in *Injector) Record(ex *proxy.Exchange) {
	if ex == nil || ex.Session == nil {
		return
	}
	var key string
	switch {
	case ex.Method == "initialize" || ex.Method == "server/discover":
		key = "init"
	case ex.Method == "tools/call" && ex.Local:
		key = "call:" + paramsKey(ex.Request)
	default:
		return
	}
	if inj, ok := in.state(ex.Session).takePending(key); ok {
		ex.Injected = append(ex.Injected, inj)
	}
}

// Prefetch searches the top lessons of in.Server now, so the first
// initialize does not wait for the daemon. Run it on a goroutine when the
// sidecar starts.
func (in *Injector) Prefetch(ctx context.Context) {
	if in.NoInstructions || in.Source == nil {
		return
	}
	in.lessonsFor(ctx, in.Server)
}

// lessonsFor returns the top lessons for server: fresh ones from the cache,
// or those of a search it starts or joins, waiting at most until ctx ends;
// then stale ones, if any.
func (in *Injector) lessonsFor(ctx context.Context, server string) ([]hindsight.ScoredExperience, error) {
	ttl := orDefault(in.LessonsTTL, DefaultLessonsTTL)
	in.mu.Lock()
	if in.lessons == nil {
		in.lessons = make(map[string]*lessonsFetch)
	}
	f := in.lessons[server]
	switch {
	case f == nil:
		f = &lessonsFetch{done: make(chan struct{})}
		in.lessons[server] = f
		go in.fetchLessons(server, f, nil)
	case isDone(f.done) && !f.refresh && (time.Since(f.at) > ttl || (f.err != nil && time.Since(f.at) > retryFailed)):
		// Stale: refresh in the background and wait for it like a first
		// fetch, falling back to what we had.
		f.refresh = true
		nf := &lessonsFetch{done: make(chan struct{})}
		go in.fetchLessons(server, nf, f)
		f = nf
	}
	in.mu.Unlock()
	select {
	case <-f.done:
		return f.list, f.err
	case <-ctx.Done():
		in.mu.Lock()
		old := in.lessons[server]
		in.mu.Unlock()
		if old != nil && old != f && isDone(old.done) {
			return old.list, old.err
		}
		return nil, ctx.Err()
	}
}

// fetchLessons runs one search for server's top lessons into f, and makes f
// the cached fetch when it succeeded (or when there was none before).
func (in *Injector) fetchLessons(server string, f, prev *lessonsFetch) {
	ctx, cancel := context.WithTimeout(context.Background(), orDefault(in.QueryTimeout, DefaultQueryTimeout))
	defer cancel()
	n := orDefault(in.MaxInstructionLessons, DefaultMaxInstructionLessons)
	list, err := in.Source.Search(ctx, hindsight.Query{
		Text:      "", // no text: the store's best by confidence, evidence, hits and age
		Namespace: in.namespace(),
		Server:    server,
		K:         2 * n,
		NoHit:     true,
		// Pinned lessons first, whatever their rank (see
		// instructionsBlock).
		IncludePinned: true,
	})
	f.list, f.err, f.at = list, err, time.Now()
	if err != nil {
		in.logger().Warn("prefetch lessons", "server", server, "err", err)
	}
	close(f.done)
	in.mu.Lock()
	if prev != nil {
		prev.refresh = false
	}
	if err == nil || prev == nil {
		in.lessons[server] = f
	}
	in.mu.Unlock()
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// paramsKey identifies a tools/call request's params, to match a local
// answer with its exchange.
func paramsKey(request []byte) string { return gjson.GetBytes(request, "params").Raw }
