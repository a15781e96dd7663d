package sidecar

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// TestChain holds how chain composes stages: rewrites piped in order (nil
// leaves the result as it was), the first LocalHandler answers, Record and
// Exchange reach every stage in order, and a field no stage sets stays
// nil.
func TestChain(t *testing.T) {
	var calls []string
	note := func(s string) { calls = append(calls, s) }
	add := func(name string) func(context.Context, *proxy.Session, json.RawMessage) json.RawMessage {
		return func(_ context.Context, _ *proxy.Session, r json.RawMessage) json.RawMessage {
			note(name + " saw " + string(r))
			return json.RawMessage(strings.TrimSuffix(string(r), "]") + `,"` + name + `"]`)
		}
	}
	keep := func(name string) func(context.Context, *proxy.Session, json.RawMessage) json.RawMessage {
		return func(_ context.Context, _ *proxy.Session, r json.RawMessage) json.RawMessage {
			note(name + " saw " + string(r))
			return nil
		}
	}
	answer := func(name string, tool string) func(*proxy.Session, string, json.RawMessage) proxy.LocalHandler {
		return func(_ *proxy.Session, n string, _ json.RawMessage) proxy.LocalHandler {
			note(name + " asked " + n)
			if n != tool {
				return nil
			}
			return func(context.Context) (json.RawMessage, error) { return json.RawMessage(`"` + name + `"`), nil }
		}
	}
	h := chain([]stage{
		{"a", proxy.Hooks{ToolsList: add("a"), ToolCall: answer("a", "x"), Exchange: func(*proxy.Exchange) { note("a exchange") }}},
		{"b", proxy.Hooks{ToolsList: keep("b"), Record: func([]*proxy.Exchange) { note("b record") }}},
		{"c", proxy.Hooks{ToolsList: add("c"), ToolCall: answer("c", "y"), Exchange: func(*proxy.Exchange) { note("c exchange") },
			Record: func([]*proxy.Exchange) { note("c record") }}},
	})
	if h.Initialize != nil || h.ToolResult != nil {
		t.Errorf("hooks no stage sets are set: Initialize %v, ToolResult %v", h.Initialize != nil, h.ToolResult != nil)
	}
	if got := string(h.ToolsList(context.Background(), nil, json.RawMessage(`[]`))); got != `[,"a","c"]` {
		t.Errorf("ToolsList gave %s", got)
	}
	for _, c := range []struct{ tool, want string }{{"x", `"a"`}, {"y", `"c"`}, {"z", ""}} {
		tool, want := c.tool, c.want
		lh := h.ToolCall(nil, tool, nil)
		var got string
		if lh != nil {
			r, _ := lh(context.Background())
			got = string(r)
		}
		if got != want {
			t.Errorf("call of %s answered %q, want %q", tool, got, want)
		}
	}
	h.Record(nil)
	h.Exchange(&proxy.Exchange{})
	want := []string{`a saw []`, `b saw [,"a"]`, `c saw [,"a"]`,
		"a asked x", "a asked y", "c asked y", "a asked z", "c asked z",
		"b record", "c record", "a exchange", "c exchange"}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("calls\n%q\nwant\n%q", calls, want)
	}

	unchanged := chain([]stage{{"k", proxy.Hooks{ToolsList: keep("k")}}, {"l", proxy.Hooks{ToolsList: keep("l")}}})
	if got := unchanged.ToolsList(context.Background(), nil, json.RawMessage(`[]`)); got != nil {
		t.Errorf("a chain whose stages change nothing returned %s, want nil (unchanged)", got)
	}
}

// BenchmarkChainExchange compares the chain's Exchange over the sidecar's
// four Exchange stages with the nested closures it replaced (the
// baseline, in the same run).
func BenchmarkChainExchange(b *testing.B) {
	var n int
	f := func(*proxy.Exchange) { n++ }
	ex := &proxy.Exchange{}
	b.Run("chain", func(b *testing.B) {
		h := chain([]stage{{"a", proxy.Hooks{Exchange: f}}, {"b", proxy.Hooks{Exchange: f}},
			{"c", proxy.Hooks{Exchange: f}}, {"d", proxy.Hooks{Exchange: f}}})
		for b.Loop() {
			h.Exchange(ex)
		}
	})
	b.Run("nested", func(b *testing.B) {
		h := &proxy.Hooks{Exchange: func(ex *proxy.Exchange) { f(ex); f(ex) }}
		next := h.Exchange
		h.Exchange = func(ex *proxy.Exchange) { f(ex); next(ex) }
		prev := h.Exchange
		h.Exchange = func(ex *proxy.Exchange) { prev(ex); f(ex) }
		for b.Loop() {
			h.Exchange(ex)
		}
	})
}
