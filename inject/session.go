package inject

import (
	"runtime"
	"sync"
	"weak"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
)

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

// state returns the Injector's record of s, creating it. Records go away
// with their sessions.
func (in *Injector) state(s *proxy.Session) *session { return in.sessions.get(s) }

// sessionTable holds the Injector's record of each live proxy session.
type sessionTable struct {
	mu sync.Mutex
	m  map[weak.Pointer[proxy.Session]]*session
}

// get returns the record of s, creating it; it goes away with s.
func (t *sessionTable) get(s *proxy.Session) *session {
	key := weak.Make(s)
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.m[key]; st != nil {
		return st
	}
	if t.m == nil {
		t.m = make(map[weak.Pointer[proxy.Session]]*session)
	}
	st := &session{toolName: QueryToolName}
	t.m[key] = st
	runtime.AddCleanup(s, func(k weak.Pointer[proxy.Session]) {
		t.mu.Lock()
		delete(t.m, k)
		t.mu.Unlock()
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
// injected for it. Install calls it from the Record hook and again from
// the Exchange hook; an exchange that already carries its injection is
// left as it is.
func (in *Injector) Record(ex *proxy.Exchange) {
	if ex == nil || ex.Session == nil {
		return
	}
	var key, channel string
	switch {
	case ex.Method == "initialize" || ex.Method == "server/discover":
		key, channel = "init", ChannelInstructions
	case ex.Method == "tools/call" && ex.Local:
		key, channel = "call:"+paramsKey(ex.Request), ChannelQuery
	default:
		return
	}
	for _, inj := range ex.Injected {
		if inj.Channel == channel {
			return
		}
	}
	if inj, ok := in.state(ex.Session).takePending(key); ok {
		ex.Injected = append(ex.Injected, inj)
	}
}
