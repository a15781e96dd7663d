package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/wire"
)

// Client speaks to the daemon over its Unix socket. It is safe for
// concurrent use. Its Deliver method makes it a spool.Deliverer.
type Client struct {
	socket string
	hc     *http.Client
	// fullSince is when a daemon last answered that it does not know
	// compact steps (one older than this client); until compactRetry has
	// passed, IngestRaw sends them whole.
	fullSince atomic.Int64
}

// compactRetry is how long IngestRaw sends whole steps to a daemon that
// did not know compact ones, before it asks again (it may have been
// replaced by a newer one).
const compactRetry = time.Minute

// NewClient returns a client for the daemon listening on socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    4,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{socket: socket, hc: &http.Client{Transport: tr}}
}

// Socket returns the socket's path.
func (c *Client) Socket() string { return c.socket }

// CloseIdle closes idle connections to the daemon.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }

// do sends a request and returns the response when its status is 2xx;
// otherwise it returns the daemon's error as an *APIError.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string) (*http.Response, error) {
	u := "http://hindsight/" + apiVersion + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if b, ok := body.(*batchBody); ok {
		b.request(req)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach daemon at %s: %w", c.socket, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = string(bytes.TrimSpace(b))
	}
	return nil, &APIError{Status: resp.StatusCode, Message: e.Error}
}

// call sends in as JSON (when not nil) and decodes the answer into out
// (when not nil). A write the daemon queued (202) is a *QueuedError.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	resp, err := c.do(ctx, method, path, q, body, ctype)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		var q QueuedResult
		if err := json.NewDecoder(resp.Body).Decode(&q); err == nil && q.Queued {
			return &QueuedError{Op: q.Op}
		}
		return nil
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return decodeAnswer(resp, out)
}

// decodeAnswer decodes the JSON body of a 2xx answer into out and closes
// it.
func decodeAnswer(resp *http.Response, out any) error {
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode daemon answer: %w", err)
	}
	return nil
}

// Health asks whether the daemon is there.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.call(ctx, http.MethodGet, "/health", nil, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Status returns the daemon's status (without outboxes: see spool.List).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	if err := c.call(ctx, http.MethodGet, "/status", nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Deliver sends a batch of steps. Delivering the same steps again is
// harmless. An error wrapping ErrRejected means the daemon refused the
// batch as bad input.
func (c *Client) Deliver(ctx context.Context, steps []hindsight.Step) error {
	_, err := c.Ingest(ctx, steps)
	return err
}

// Ingest sends a batch of steps and says how many were new.
func (c *Client) Ingest(ctx context.Context, steps []hindsight.Step) (IngestResult, error) {
	var res IngestResult
	err := c.call(ctx, http.MethodPost, "/steps", nil, StepBatch{Steps: steps}, &res)
	return res, err
}

// DeliverRaw is Deliver for steps already encoded as JSON (each a
// hindsight.Step): they are sent as they are.
func (c *Client) DeliverRaw(ctx context.Context, steps []json.RawMessage) error {
	_, err := c.IngestRaw(ctx, steps)
	return err
}

// IngestRaw is Ingest for steps already encoded as JSON (each a
// hindsight.Step). They are sent as they are, neither validated nor
// encoded again: the daemon refuses a batch that does not decode, with an
// error wrapping ErrRejected.
//
// Steps may be in their compact encoding (wire.AppendCompactStep,
// as capture's outbox stores them). A daemon older than this client does
// not know it: it answers 404 to POST /v1/steps/compact, and the steps are
// then sent whole, decoded and encoded again, to POST /v1/steps.
func (c *Client) IngestRaw(ctx context.Context, steps []json.RawMessage) (IngestResult, error) {
	if since := c.fullSince.Load(); since == 0 || time.Since(time.Unix(0, since)) > compactRetry {
		res, err := c.ingestRaw(ctx, "/steps/compact", steps)
		if ae := (*APIError)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			return res, err
		}
		c.fullSince.Store(time.Now().UnixNano())
	}
	whole := make([]json.RawMessage, len(steps))
	for i, raw := range steps {
		var s hindsight.Step
		if err := wire.UnmarshalCompact(raw, &s); err != nil {
			return IngestResult{}, fmt.Errorf("%w: decode step %d: %v", ErrRejected, i, err)
		}
		b, err := wire.AppendStep(nil, &s)
		if err != nil {
			return IngestResult{}, fmt.Errorf("%w: encode step %d: %v", ErrRejected, i, err)
		}
		whole[i] = b
	}
	return c.ingestRaw(ctx, "/steps", whole)
}

func (c *Client) ingestRaw(ctx context.Context, path string, steps []json.RawMessage) (IngestResult, error) {
	var res IngestResult
	resp, err := c.do(ctx, http.MethodPost, path, nil, newBatchBody(steps), "application/json")
	if err != nil {
		return res, err
	}
	return res, decodeAnswer(resp, &res)
}

// batchBody is the body of a batch of steps, {"steps":[…]}, read from the
// steps' own encodings rather than copied into one buffer first (a batch
// is up to a few hundred KB, sent many times a second under load). The
// encodings must not change while it is read, which may go on after the
// request returned (see http.RoundTripper); the outbox never modifies one.
type batchBody struct {
	net.Buffers
	steps []json.RawMessage
	size  int64
}

var (
	batchOpen  = []byte(`{"steps":[`)
	batchComma = []byte(`,`)
	batchClose = []byte(`]}`)
)

func newBatchBody(steps []json.RawMessage) *batchBody {
	b := &batchBody{Buffers: make(net.Buffers, 0, 2*len(steps)+1), steps: steps}
	b.Buffers = append(b.Buffers, batchOpen)
	b.size = int64(len(batchOpen) + len(batchClose))
	for i, s := range steps {
		if i > 0 {
			b.Buffers = append(b.Buffers, batchComma)
			b.size++
		}
		b.Buffers = append(b.Buffers, s)
		b.size += int64(len(s))
	}
	b.Buffers = append(b.Buffers, batchClose)
	return b
}

// request sets req's length and, so that the transport may send it again
// on a fresh connection, how to read the body anew.
func (b *batchBody) request(req *http.Request) {
	req.ContentLength = b.size
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(newBatchBody(b.steps)), nil }
}

// CloseSession tells the daemon a session ended. With source set, lastSeq
// is the seq of the session's last step; nil when unknown.
func (c *Client) CloseSession(ctx context.Context, sessionID, source string, lastSeq *uint64) ([]string, error) {
	var res SessionCloseResult
	err := c.call(ctx, http.MethodPost, "/sessions/close", nil, SessionClose{SessionID: sessionID, Source: source, LastSeq: lastSeq}, &res)
	return res.Final, err
}

// Tasks lists tasks, newest first, without steps.
func (c *Client) Tasks(ctx context.Context, f TaskFilter) ([]hindsight.Task, error) {
	q := url.Values{}
	if f.Final != nil {
		q.Set("final", strconv.FormatBool(*f.Final))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var tasks []hindsight.Task
	err := c.call(ctx, http.MethodGet, "/tasks", q, nil, &tasks)
	return tasks, err
}

// Task returns a task with its steps.
func (c *Client) Task(ctx context.Context, id string) (*hindsight.Task, error) {
	var t hindsight.Task
	if err := c.call(ctx, http.MethodGet, "/tasks/"+url.PathEscape(id), nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Export copies the steps of the tasks ids (all when empty) to w as JSON
// Lines, tasks oldest first.
func (c *Client) Export(ctx context.Context, w io.Writer, ids ...string) error {
	resp, err := c.do(ctx, http.MethodGet, "/export", url.Values{"task": ids}, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("export steps: %w", err)
	}
	return nil
}

// Reflect runs reflection now on the tasks ids, and on every pending task
// when pending is set; progress, when not nil, sees each task done.
func (c *Client) Reflect(ctx context.Context, ids []string, pending bool, progress func(done, total int)) error {
	b, err := json.Marshal(ReflectRequest{TaskIDs: ids, Pending: pending})
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, "/reflect", nil, bytes.NewReader(b), "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var p ReflectProgress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return fmt.Errorf("decode reflect progress: %w", err)
		}
		if p.Finished {
			if p.Error != "" {
				return fmt.Errorf("reflect: %s", p.Error)
			}
			return nil
		}
		if progress != nil {
			progress(p.Done, p.Total)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read reflect progress: %w", err)
	}
	return errors.New("reflect: the daemon ended the answer early")
}
