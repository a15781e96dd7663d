package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The HTTP sidecar's budget for request bodies in flight: each body is
// bounded (HTTPHandler.MaxBodyBytes), and so are all of them together
// (HTTPHandler.BodyBudget), so that agents sending large bodies at once
// cannot make the sidecar hold more than the budget. A body is held from
// its first byte until its request is answered.

// DefaultBodyBudget is HTTPHandler.BodyBudget's default.
const DefaultBodyBudget = 256 << 20

// bodyRetryAfter is the Retry-After of a body refused for the budget.
const bodyRetryAfter = "1"

// errBodyBudget is readBudgeted's error for a body the budget cannot take.
var errBodyBudget = errors.New("request bodies in flight are over the sidecar's budget")

// bodyBudget is an HTTPHandler's account of the bytes of request bodies
// in flight.
type bodyBudget struct {
	mu      sync.Mutex
	used    int64
	refused atomic.Int64
	log     rateLimit
}

func (h *HTTPHandler) bodyBudget() int64 {
	if h.BodyBudget != 0 {
		return h.BodyBudget
	}
	return DefaultBodyBudget
}

// take reserves n bytes of the budget, or reports false.
func (h *HTTPHandler) take(n int64) bool {
	limit := h.bodyBudget()
	b := &h.bodies
	b.mu.Lock()
	defer b.mu.Unlock()
	if limit > 0 && b.used+n > limit {
		return false
	}
	b.used += n
	return true
}

// give returns n bytes taken by take.
func (h *HTTPHandler) give(n int64) {
	if n == 0 {
		return
	}
	h.bodies.mu.Lock()
	h.bodies.used -= n
	h.bodies.mu.Unlock()
}

// BodiesRefused returns how many requests were refused (503) because
// the bodies in flight would have gone over BodyBudget.
func (h *HTTPHandler) BodiesRefused() int64 { return h.bodies.refused.Load() }

// readBudgeted reads r to its end into a buffer whose capacity it first
// takes from the budget: the size announced (hint, the request's
// Content-Length; <= 0: unknown) at once, growth as it comes, never beyond
// limit+1 (a reader bounded to limit fails past it). It
// returns the body and the bytes it holds, to give back when the request
// is answered (also on error).
func (h *HTTPHandler) readBudgeted(r io.Reader, hint, limit int64) (body []byte, held int64, err error) {
	c := min(int64(4096), limit+1)
	if hint > 0 {
		c = min(hint, limit)
	}
	if !h.take(c) {
		return nil, 0, errBodyBudget
	}
	held = c
	buf := make([]byte, 0, c+1) // a spare byte to see the end, not counted
	for {
		if len(buf) == cap(buf) {
			grow := min(int64(cap(buf)), limit+1-int64(cap(buf))) // 0 or less: at the limit
			if grow <= 0 {
				grow = 1 // the limit reader fails on the next read
			}
			if !h.take(grow) {
				return nil, held, errBodyBudget
			}
			held += grow
			nb := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}

// refuseBody answers a request whose body the budget cannot take: 503
// with Retry-After, the connection closed (its body is not read), and the
// refusal counted and logged (at most a few lines a minute).
func (h *HTTPHandler) refuseBody(w http.ResponseWriter) {
	n := h.bodies.refused.Add(1)
	h.bodies.mu.Lock()
	if h.bodies.log.every == 0 {
		h.bodies.log.burst, h.bodies.log.every = 3, 20*time.Second
	}
	h.bodies.mu.Unlock()
	if ok, _ := h.bodies.log.allow(); ok {
		h.logger().Warn("request refused: bodies in flight over the budget (see --body-budget)", "budget_bytes", h.bodyBudget(), "refused_total", n)
	}
	w.Header().Set("Retry-After", bodyRetryAfter)
	w.Header().Set("Connection", "close")
	writeJSON(w, http.StatusServiceUnavailable, ErrorResponse(nil, CodeServerUnavailable,
		fmt.Sprintf("the sidecar holds as many request bodies as it may (%d MiB in flight); retry shortly", h.bodyBudget()>>20)))
}
