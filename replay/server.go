package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Server is a stand-in MCP server that answers from a Recording.
//
// mcp-go's MCPServer speaks the protocol (both spec eras: initialize and
// 2026-07-28's server/discover, version negotiation, ping, errors for
// what it does not know); every tool, resource and prompt of the
// recording is registered with it. The answer itself is the recorded one,
// as it was relayed (Hindsight's additions removed): it replaces the
// result mcp-go built, so a client sees the recorded bytes' content.
//
//   - initialize and server/discover: the recorded result (either era's
//     serves the other), with the negotiated protocol version.
//   - tools/call: the recorded call the Matcher picks; a call without a
//     match gets an isError result naming the closest recorded call; a
//     recorded answer that was truncated gets an isError result saying it
//     cannot be replayed; a recorded JSON-RPC error is answered as one.
//   - tools/list, resources/list, resources/templates/list, prompts/list
//     (by cursor), resources/read, prompts/get, completion/complete (by
//     parameters): the recorded answer; one never recorded gets an error.
//
// Which recorded answers were used is the Server's state, shared by all
// its clients: a stand-in over HTTP has no sessions, and a second client
// of it continues where the first stopped.
type Server struct {
	rec   *Recording
	mode  Match
	match *Matcher
	mcp   *server.MCPServer
}

// slot carries the recorded answer of one request from dispatch to the
// response.
type slot struct {
	result json.RawMessage
	err    *hindsight.RPCError
}

type slotKey struct{}

// NewServer returns a stand-in for the server of rec.
func NewServer(rec *Recording, mode Match) *Server {
	if mode == "" {
		mode = MatchExact
	}
	s := &Server{rec: rec, mode: mode, match: NewMatcher(rec, mode)}
	info := gjson.GetBytes(rec.Initialize, "serverInfo")
	if !info.Exists() {
		info = gjson.GetBytes(rec.Discover, "serverInfo")
	}
	name, version := info.Get("name").String(), info.Get("version").String()
	if name == "" {
		name = "hindsight-replay"
	}
	if version == "" {
		version = "0"
	}
	opts := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(noCompletion{}),
		server.WithResourceCompletionProvider(noCompletion{}),
		server.WithLogging(),
	}
	s.mcp = server.NewMCPServer(name, version, opts...)
	s.register()
	return s
}

type noCompletion struct{}

func (noCompletion) CompletePromptArgument(context.Context, string, mcp.CompleteArgument, mcp.CompleteContext) (*mcp.Completion, error) {
	return &mcp.Completion{Values: []string{}}, nil
}

func (noCompletion) CompleteResourceArgument(context.Context, string, mcp.CompleteArgument, mcp.CompleteContext) (*mcp.Completion, error) {
	return &mcp.Completion{Values: []string{}}, nil
}

// register tells mcp-go every tool, resource and prompt the recording
// knows, so that it routes their requests.
func (s *Server) register() {
	tools := map[string]bool{}
	resources := map[string]bool{}
	prompts := map[string]bool{}
	templates := map[string]bool{}
	addTool := func(name string) {
		if name == "" || tools[name] {
			return
		}
		tools[name] = true
		s.mcp.AddTool(mcp.Tool{Name: name, RawInputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
			})
	}
	addResource := func(uri string) {
		if uri == "" || resources[uri] {
			return
		}
		resources[uri] = true
		s.mcp.AddResource(mcp.Resource{URI: uri, Name: uri},
			func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{}, nil
			})
	}
	addPrompt := func(name string) {
		if name == "" || prompts[name] {
			return
		}
		prompts[name] = true
		s.mcp.AddPrompt(mcp.Prompt{Name: name}, func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{}}, nil
		})
	}
	for _, c := range s.rec.Calls {
		addTool(c.Tool)
	}
	for _, a := range s.rec.Answers {
		res := gjson.ParseBytes(a.Result)
		switch a.Method {
		case "tools/list":
			res.Get("tools.#.name").ForEach(func(_, n gjson.Result) bool { addTool(n.String()); return true })
		case "resources/list":
			res.Get("resources.#.uri").ForEach(func(_, u gjson.Result) bool { addResource(u.String()); return true })
		case "resources/read":
			addResource(gjson.GetBytes(a.Params, "uri").String())
		case "resources/templates/list":
			res.Get("resourceTemplates.#.uriTemplate").ForEach(func(_, u gjson.Result) bool {
				if t := u.String(); t != "" && !templates[t] {
					templates[t] = true
					s.addTemplate(t)
				}
				return true
			})
		case "prompts/list":
			res.Get("prompts.#.name").ForEach(func(_, n gjson.Result) bool { addPrompt(n.String()); return true })
		case "prompts/get":
			addPrompt(gjson.GetBytes(a.Params, "name").String())
		}
	}
}

// addTemplate registers a resource template; one mcp-go cannot parse is
// left out (its reads were registered as resources).
func (s *Server) addTemplate(t string) {
	defer func() { _ = recover() }()
	s.mcp.AddResourceTemplate(mcp.NewResourceTemplate(t, t),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{}, nil
		})
}

// errNotRecorded is the JSON-RPC error code of a request the recording
// has no answer to (invalid params, as for an unknown resource).
const errNotRecorded = -32602

// dispatch picks the recorded answer of a request.
func (s *Server) dispatch(method string, params json.RawMessage) *slot {
	switch method {
	case "initialize":
		if s.rec.Initialize != nil {
			return &slot{result: s.rec.Initialize}
		}
		if s.rec.Discover != nil {
			return &slot{result: pick(s.rec.Discover, "capabilities", "serverInfo", "instructions")}
		}
		return nil
	case "server/discover":
		if s.rec.Discover != nil {
			return &slot{result: s.rec.Discover}
		}
		if s.rec.Initialize != nil {
			return &slot{result: pick(s.rec.Initialize, "capabilities", "serverInfo", "instructions")}
		}
		return nil
	case "tools/call":
		p := gjson.ParseBytes(params)
		tool := p.Get("name").String()
		args := json.RawMessage(p.Get("arguments").Raw)
		c, closest := s.match.Call(tool, args)
		switch {
		case c == nil:
			return &slot{result: errorResult(Unmatched(s.mode, tool, args, closest))}
		case c.Truncated:
			return &slot{result: errorResult(fmt.Sprintf("[replay] the recorded answer of step %d (%s) was truncated when it was stored: it cannot be replayed.", c.Step, c.Tool))}
		case c.Error != nil:
			return &slot{err: c.Error}
		case c.Result == nil:
			return &slot{result: errorResult(fmt.Sprintf("[replay] step %d (%s) has no recorded answer.", c.Step, c.Tool))}
		}
		return &slot{result: c.Result}
	case "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		return nil
	}
	if strings.HasPrefix(method, "notifications/") {
		return nil
	}
	a := s.match.Answer(method, params)
	switch {
	case a == nil:
		if method == "completion/complete" {
			return nil // mcp-go's empty completion
		}
		return &slot{err: &hindsight.RPCError{Code: errNotRecorded, Message: fmt.Sprintf("[replay] no recorded answer to %s %s", method, compactJSON(params))}}
	case a.Truncated:
		return &slot{err: &hindsight.RPCError{Code: errNotRecorded, Message: fmt.Sprintf("[replay] the recorded answer of step %d (%s) was truncated when it was stored: it cannot be replayed", a.Step, method)}}
	case a.Error != nil:
		return &slot{err: a.Error}
	}
	return &slot{result: a.Result}
}

// pick returns the members keys of obj.
func pick(obj json.RawMessage, keys ...string) json.RawMessage {
	out := []byte(`{}`)
	for _, k := range keys {
		if v := gjson.GetBytes(obj, k); v.Exists() {
			out, _ = sjson.SetRawBytes(out, k, []byte(v.Raw))
		}
	}
	return out
}

func errorResult(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": true})
	return b
}

// Handle answers one JSON-RPC message (a request, a notification or a
// batch's member) and returns the response to write, or nil.
func (s *Server) Handle(ctx context.Context, msg json.RawMessage) json.RawMessage {
	m := gjson.ParseBytes(msg)
	method := m.Get("method").String()
	if method == "" {
		return nil // a response to a request the stand-in never sends
	}
	id := m.Get("id")
	var sl *slot
	if id.Exists() {
		sl = s.dispatch(method, json.RawMessage(m.Get("params").Raw))
	}
	resp := s.mcp.HandleMessage(ctx, msg)
	if resp == nil || !id.Exists() {
		return nil
	}
	out, err := json.Marshal(resp)
	if err != nil {
		return nil
	}
	if sl == nil {
		return out
	}
	built := gjson.GetBytes(out, "result")
	if !built.Exists() {
		// mcp-go refused the request. Keep its error, unless it refused
		// what only the recording knows (an unknown tool, resource or
		// prompt).
		code := gjson.GetBytes(out, "error.code").Int()
		if !(code == mcp.METHOD_NOT_FOUND || code == mcp.INVALID_PARAMS || code == mcp.RESOURCE_NOT_FOUND) ||
			(method != "tools/call" && method != "resources/read" && method != "prompts/get") {
			return out
		}
	}
	if sl.err != nil {
		e := map[string]any{"code": sl.err.Code, "message": sl.err.Message}
		if len(sl.err.Data) > 0 {
			e["data"] = sl.err.Data
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id.Raw), "error": e})
		return b
	}
	result := sl.result
	switch {
	case method == "initialize":
		result, _ = sjson.SetBytes(result, "protocolVersion", built.Get("protocolVersion").String())
	case method == "server/discover":
		result, _ = sjson.SetRawBytes(result, "supportedVersions", []byte(built.Get("supportedVersions").Raw))
	}
	if built.Get("resultType").Exists() {
		// The 2026-07-28 era: mcp-go's decoration (resultType,
		// serverInfo…) stays, the recorded members win.
		merged := []byte(built.Raw)
		gjson.ParseBytes(result).ForEach(func(k, v gjson.Result) bool {
			merged, _ = sjson.SetRawBytes(merged, escapeKey(k.Str), []byte(v.Raw))
			return true
		})
		// The envelope names the recorded server, title and all.
		const infoPath = `_meta.io\.modelcontextprotocol/serverInfo`
		if info := s.serverInfo(); info != nil && gjson.GetBytes(merged, infoPath).Exists() {
			merged, _ = sjson.SetRawBytes(merged, infoPath, info)
		}
		result = merged
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id.Raw), "result": json.RawMessage(result)})
	return b
}

// serverInfo returns the recorded serverInfo, or nil.
func (s *Server) serverInfo() []byte {
	for _, r := range []json.RawMessage{s.rec.Initialize, s.rec.Discover} {
		if v := gjson.GetBytes(r, "serverInfo"); v.IsObject() {
			return []byte(v.Raw)
		}
	}
	return nil
}

// escapeKey escapes a member name for an sjson path.
func escapeKey(k string) string {
	r := strings.NewReplacer(".", `\.`, "*", `\*`, "?", `\?`, "|", `\|`, "#", `\#`, "@", `\@`)
	return r.Replace(k)
}

// ServeStdio answers newline-delimited JSON-RPC from r on w until r ends
// or ctx is done. Requests are answered in order.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var mu sync.Mutex
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := w.Write(append(b, '\n'))
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := br.ReadBytes('\n')
		if t := strings.TrimSpace(string(line)); t != "" {
			for _, out := range s.handleBody(ctx, []byte(t)) {
				if werr := write(out); werr != nil {
					return fmt.Errorf("write response: %w", werr)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
	}
}

// handleBody answers a message or a batch; a batch's answers come back as
// one array.
func (s *Server) handleBody(ctx context.Context, body []byte) [][]byte {
	p := gjson.ParseBytes(body)
	if !p.IsArray() {
		if !gjson.ValidBytes(body) {
			return [][]byte{[]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)}
		}
		if out := s.Handle(ctx, body); out != nil {
			return [][]byte{out}
		}
		return nil
	}
	var outs []json.RawMessage
	for _, m := range p.Array() {
		if out := s.Handle(ctx, json.RawMessage(m.Raw)); out != nil {
			outs = append(outs, out)
		}
	}
	if len(outs) == 0 {
		return nil
	}
	b, _ := json.Marshal(outs)
	return [][]byte{b}
}

// ServeHTTP answers Streamable HTTP without sessions: a POST gets its
// answer as application/json (202 for notifications alone); a GET (the
// standalone stream) gets 405, as the stand-in never sends a message of its
// own; DELETE is accepted.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	default:
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	outs := s.handleBody(r.Context(), body)
	if len(outs) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(outs[0])
}
