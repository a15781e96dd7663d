package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
)

// sseSession is a session over the legacy HTTP+SSE transport: one GET
// stream carries every server message, POSTs to the announced endpoint
// carry the agent's.
type sseSession struct {
	u        *HTTPUpstream
	sink     UpstreamSink
	endpoint string
	cancel   context.CancelFunc

	mu     sync.Mutex
	closed bool
}

// dialSSE opens the session's event stream and waits for its endpoint
// event; the POST endpoint must share the stream's origin.
func (u *HTTPUpstream) dialSSE(ctx context.Context, hdr http.Header, sink UpstreamSink) (*sseSession, error) {
	streamCtx, cancel := context.WithCancel(context.Background())
	stopAfter := context.AfterFunc(ctx, cancel) // the opening is bounded by ctx
	fail := func(err error) (*sseSession, error) {
		cancel()
		return nil, err
	}
	req, err := u.newRequest(streamCtx, http.MethodGet, u.URL, nil, hdr)
	if err != nil {
		return fail(fmt.Errorf("build upstream request: %w", err))
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := u.client().Do(req)
	if err != nil {
		return fail(fmt.Errorf("open upstream SSE stream: %w", err))
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return fail(statusError(resp))
	}
	r := newSSEReader(resp.Body, u.maxBytes())
	ev, err := r.nextData()
	if err == nil && ev.Event != "endpoint" {
		err = fmt.Errorf("first event is %q, want \"endpoint\"", ev.Event)
	}
	var ep *url.URL
	if err == nil {
		ep, err = resp.Request.URL.Parse(string(bytes.TrimSpace(ev.Data)))
	}
	if err == nil && !sameOrigin(resp.Request.URL, ep) {
		// The agent's Authorization and the configured headers go with
		// every POST to the endpoint: only to the stream's own origin.
		err = fmt.Errorf("%w: the SSE endpoint is on %s, the stream on %s", ErrCrossOrigin, originOf(ep), originOf(resp.Request.URL))
	}
	if err != nil || !stopAfter() {
		resp.Body.Close()
		if err == nil {
			err = ctx.Err()
		}
		return fail(fmt.Errorf("open upstream SSE stream: %w", err))
	}
	s := &sseSession{u: u, sink: sink, endpoint: ep.String(), cancel: cancel}
	go s.read(r, resp.Body)
	return s, nil
}

func (s *sseSession) read(r *sseReader, body io.Closer) {
	defer body.Close()
	var err error
	for {
		var ev sseEvent
		ev, err = r.nextMessage()
		if err != nil {
			break
		}
		s.sink.Message(ev.Data)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if !closed && s.sink.Closed != nil {
		if err == io.EOF {
			err = errors.New("the server closed it")
		}
		s.sink.Closed(fmt.Errorf("upstream SSE stream ended: %w", err))
	}
}

func (s *sseSession) Send(ctx context.Context, msg []byte, hdr http.Header) (*Reply, error) {
	req, err := s.u.newRequest(ctx, http.MethodPost, s.endpoint, msg, hdr)
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.u.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("post to upstream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, statusError(resp)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil, nil
}

func (s *sseSession) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	return nil
}
