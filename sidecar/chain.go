package sidecar

import (
	"context"
	"encoding/json"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// A stage is one part of the sidecar that sees the relay's traffic, with
// the proxy.Hooks fields it sets (the others nil).
type stage struct {
	name  string
	hooks proxy.Hooks
}

// chain composes stages, in their order, into the one proxy.Hooks the
// relay calls:
//
//   - Initialize, ToolsList and ToolResult: each stage rewrites the result
//     the stages before it returned (a nil return leaves it unchanged); the
//     chain returns nil when no stage changed it.
//   - ToolCall: the first stage that returns a LocalHandler answers the
//     call; the stages after it never see it.
//   - Record and Exchange: every stage, in order, on the same exchanges.
//
// A field that no stage sets stays nil, so the relay skips it; one that a
// single stage sets is that stage's func, unwrapped.
func chain(stages []stage) *proxy.Hooks {
	var (
		initialize, toolsList []rewrite[*proxy.Session]
		toolResult            []rewrite[*proxy.Exchange]
		toolCall              []func(*proxy.Session, string, json.RawMessage) proxy.LocalHandler
		record                []func([]*proxy.Exchange)
		exchange              []func(*proxy.Exchange)
	)
	for _, st := range stages {
		h := st.hooks
		initialize = appendSet(initialize, h.Initialize, h.Initialize != nil)
		toolsList = appendSet(toolsList, h.ToolsList, h.ToolsList != nil)
		toolResult = appendSet(toolResult, h.ToolResult, h.ToolResult != nil)
		toolCall = appendSet(toolCall, h.ToolCall, h.ToolCall != nil)
		record = appendSet(record, h.Record, h.Record != nil)
		exchange = appendSet(exchange, h.Exchange, h.Exchange != nil)
	}
	return &proxy.Hooks{
		Initialize: pipe(initialize),
		ToolsList:  pipe(toolsList),
		ToolResult: pipe(toolResult),
		ToolCall:   firstHandler(toolCall),
		Record:     each(record),
		Exchange:   each(exchange),
	}
}

// rewrite is the shape of the hooks that rewrite a result (Initialize and
// ToolsList on a session, ToolResult on an exchange).
type rewrite[T any] = func(ctx context.Context, on T, result json.RawMessage) json.RawMessage

// appendSet appends f to fs when it is set (a func that is not nil).
func appendSet[F any](fs []F, f F, set bool) []F {
	if !set {
		return fs
	}
	return append(fs, f)
}

// pipe runs fs in order, each on the result the ones before it returned.
func pipe[T any](fs []rewrite[T]) rewrite[T] {
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return func(ctx context.Context, on T, result json.RawMessage) json.RawMessage {
		var out json.RawMessage
		for _, f := range fs {
			if o := f(ctx, on, result); o != nil {
				out, result = o, o
			}
		}
		return out
	}
}

// firstHandler asks fs in order and returns the first LocalHandler given.
func firstHandler(fs []func(*proxy.Session, string, json.RawMessage) proxy.LocalHandler) func(*proxy.Session, string, json.RawMessage) proxy.LocalHandler {
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return func(s *proxy.Session, name string, params json.RawMessage) proxy.LocalHandler {
		for _, f := range fs {
			if lh := f(s, name, params); lh != nil {
				return lh
			}
		}
		return nil
	}
}

// each runs every one of fs, in order: nested, each calling the next, as
// hooks wrapped by hand would (Exchange runs for every message relayed).
func each[T any](fs []func(T)) func(T) {
	if len(fs) == 0 {
		return nil
	}
	g := fs[len(fs)-1]
	for i := len(fs) - 2; i >= 0; i-- {
		f, next := fs[i], g
		g = func(v T) { f(v); next(v) }
	}
	return g
}
