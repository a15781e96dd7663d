package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hindsight-proxy/hindsight/wire"
	"github.com/tidwall/gjson"
)

// localCall is a request the sidecar answers itself.
type localCall struct {
	ex     *Exchange
	cancel context.CancelFunc // set once the handler runs
	gone   bool               // cancelled before the handler started
}

// localToolCall asks the ToolCall hook whether the sidecar answers this
// tools/call itself; when it does, the request is recorded as the
// sidecar's and the Action's Local runs the handler and emits ex.
func (c *Conn) localToolCall(m *Message, ex *Exchange) (Action, bool) {
	h := c.hooks()
	if h.ToolCall == nil {
		return Action{}, false
	}
	params := m.member(m.params)
	name := m.paramString(m.name)
	handler := c.askToolCall(h, name, params)
	if handler == nil {
		return Action{}, false
	}
	ex.Local = true
	lc := &localCall{ex: ex}
	key, id := wire.StringView(m.ID), m.ID // the closure must not capture m: it would go to the heap on every call
	c.mu.Lock()
	if c.local == nil {
		c.local = make(map[string]*localCall)
	}
	c.local[key] = lc
	c.mu.Unlock()
	return Action{Local: func(ctx context.Context) []byte {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		c.mu.Lock()
		if lc.gone {
			c.mu.Unlock()
			return nil
		}
		lc.cancel = cancel
		c.mu.Unlock()
		resp := c.runLocal(ctx, id, name, handler)
		c.mu.Lock()
		mine := c.local[key] == lc
		if mine {
			delete(c.local, key)
		}
		c.mu.Unlock()
		if !mine {
			return nil // cancelled meanwhile; the exchange was emitted then
		}
		ex.Response, ex.Ended = resp, time.Now()
		c.record([]*Exchange{ex})
		c.emit(ex)
		return resp
	}}, true
}

// askToolCall runs the ToolCall hook; a hook that panics forwards the call.
func (c *Conn) askToolCall(h *Hooks, name string, params json.RawMessage) (handler LocalHandler) {
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error("tools/call hook panicked; forwarding", "tool", name, "panic", fmt.Sprint(r))
			handler = nil
		}
	}()
	return h.ToolCall(c.Session, name, params)
}

// runLocal runs a local handler and encodes its answer. A handler that
// panics or returns something that is not JSON gets an internal error.
func (c *Conn) runLocal(ctx context.Context, id json.RawMessage, tool string, handler LocalHandler) (resp []byte) {
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error("local tool handler panicked", "tool", tool, "panic", fmt.Sprint(r))
			resp = ErrorResponse(id, CodeInternalError, "hindsight: "+tool+" failed")
		}
	}()
	result, err := handler(ctx)
	if err != nil {
		var re *RPCError
		if errors.As(err, &re) {
			return ErrorResponse(id, re.Code, re.Message)
		}
		return ErrorResponse(id, CodeInternalError, err.Error())
	}
	result = compact(result)
	if len(result) == 0 || !json.Valid(result) {
		c.logger().Error("local tool handler returned invalid JSON", "tool", tool, "bytes", len(result))
		return ErrorResponse(id, CodeInternalError, "hindsight: "+tool+" returned an invalid result")
	}
	return ResultResponse(id, result)
}

// cancelLocal handles the agent's cancellation of a request the sidecar
// answers itself, and reports whether it was one.
func (c *Conn) cancelLocal(raw []byte) bool {
	id := gjson.GetBytes(raw, "params.requestId")
	if !id.Exists() {
		return false
	}
	c.mu.Lock()
	lc := c.local[id.Raw]
	if lc != nil {
		delete(c.local, id.Raw)
		lc.gone = true
		if lc.cancel != nil {
			lc.cancel()
		}
	}
	c.mu.Unlock()
	if lc == nil {
		return false
	}
	lc.ex.Cancelled, lc.ex.Ended = true, time.Now()
	c.record([]*Exchange{lc.ex})
	c.emit(lc.ex)
	return true
}
