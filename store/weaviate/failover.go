package weaviate

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// preferredAgain is how long after leaving the preferred node the failover
// transport sends requests to it again.
const preferredAgain = 30 * time.Second

// failover is an http.RoundTripper that sends each REST request to one
// node of a cluster, the current one, by rewriting the request's scheme
// and host. When a request cannot reach the node at all (a dial error:
// refused, no route, dial timeout; nothing was sent), it moves on to the
// next node and sends the same request there, each node at most once per
// request. A request whose body cannot be read again (no GetBody) is not
// resent, and neither is one that failed after its connection was made:
// that node may have acted on it. preferredAgain after it left the first
// (preferred) node it tries that one again.
type failover struct {
	next  http.RoundTripper
	nodes []*url.URL // nodes[0] is the preferred node
	log   *slog.Logger
	now   func() time.Time
	back  time.Duration

	switches atomic.Int64 // times the transport moved to another node

	mu     sync.Mutex
	cur    int       // index in nodes of the current node
	left   time.Time // when it last left the preferred node
	logged int       // node of the last switch logged
}

// newFailover returns a failover transport over next (http.DefaultTransport
// when nil) for the node URLs, the preferred one first.
func newFailover(next http.RoundTripper, urls []string, log *slog.Logger) (*failover, error) {
	if next == nil {
		next = http.DefaultTransport
	}
	f := &failover{next: next, log: log, now: time.Now, back: preferredAgain}
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("parse failover URL %q: want http(s)://host:port", s)
		}
		f.nodes = append(f.nodes, u)
	}
	return f, nil
}

// node returns the index of the node the next request goes to.
func (f *failover) node() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != 0 && f.now().Sub(f.left) >= f.back {
		f.cur = 0
	}
	return f.cur
}

// failed moves the current node past i, which a request could not reach,
// unless another request has already moved it.
func (f *failover) failed(i int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != i {
		return
	}
	f.cur = (i + 1) % len(f.nodes)
	if i == 0 {
		f.left = f.now()
	}
	f.switches.Add(1)
	if f.cur != f.logged { // a switch back to where it already was is not logged again
		f.logged = f.cur
		f.log.Warn("weaviate node unreachable; requests go to another node of the cluster",
			"from", f.nodes[i].Host, "to", f.nodes[f.cur].Host, "err", err)
	}
}

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	i := f.node()
	for tried := 1; ; tried++ {
		r := req.Clone(req.Context())
		r.URL.Scheme, r.URL.Host, r.Host = f.nodes[i].Scheme, f.nodes[i].Host, ""
		if tried > 1 && hasBody {
			body, err := req.GetBody()
			if err != nil {
				return nil, fmt.Errorf("read request body again: %w", err)
			}
			r.Body = body
		}
		resp, err := f.next.RoundTrip(r)
		if err == nil || !dialError(err) || tried == len(f.nodes) || req.Context().Err() != nil ||
			(hasBody && req.GetBody == nil) {
			return resp, err
		}
		f.failed(i, err)
		i = (i + 1) % len(f.nodes)
	}
}

// dialError reports whether err is a failure to connect: the request
// never reached a server.
func dialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
