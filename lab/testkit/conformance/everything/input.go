package main

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools here need input from the client: an elicitation, a sampling or
// the client's roots. Each returns the input requests in its result
// (SEP-2322's input-required result) and finishes when it is called again
// with the answers. For a client of a revision before 2026-07-28 the go-sdk
// turns those requests into server-to-client requests on the session and
// calls the tool again itself, so one handler serves both eras.

// objectSchema is a requested schema of string-typed required properties.
func objectSchema(props ...string) json.RawMessage {
	p := make(map[string]any, len(props))
	for _, name := range props {
		p[name] = map[string]any{"type": "string"}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": p, "required": props})
	return b
}

func elicit(msg string, schema json.RawMessage) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: msg, RequestedSchema: schema}
}

func sample(prompt string, maxTokens int64) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}},
		MaxTokens: maxTokens,
	}
}

// ask is a result that asks for inputs, carrying state to the next round.
func ask(inputs mcp.InputRequestMap, state string) *mcp.CallToolResult {
	return &mcp.CallToolResult{InputRequests: inputs, RequestState: state}
}

// accepted returns the content of the elicitation answered under key when
// the user accepted it, else nil.
func accepted(in mcp.InputResponseMap, key string) map[string]any {
	if r, ok := in[key].(*mcp.ElicitResult); ok && r != nil && r.Action == "accept" {
		return r.Content
	}
	return nil
}

// field is the string value of name in the elicitation answered under key.
func field(in mcp.InputResponseMap, key, name string) string {
	s, _ := accepted(in, key)[name].(string)
	return s
}

// sampled returns the first text of the sampling answered under key.
func sampled(in mcp.InputResponseMap, key string) (string, bool) {
	switch r := in[key].(type) {
	case *mcp.CreateMessageWithToolsResult:
		for _, c := range r.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				return t.Text, true
			}
		}
		return "", r != nil
	case *mcp.CreateMessageResult:
		t, _ := r.Content.(*mcp.TextContent)
		if t == nil {
			return "", true
		}
		return t.Text, true
	}
	return "", false
}

// stateKey signs request states, so that a state the client altered is
// refused.
var stateKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}()

// seal returns payload with its signature: "payload.signature".
func seal(payload string) string {
	m := hmac.New(sha256.New, stateKey)
	m.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// unseal returns the payload of a state seal made; ok is false for a state
// whose signature does not match.
func unseal(state string) (payload string, ok bool) {
	i := strings.LastIndexByte(state, '.')
	if i < 0 {
		return "", false
	}
	return state[:i], hmac.Equal([]byte(seal(state[:i])), []byte(state))
}

// badState is the error for a request state that was not this server's.
var badState = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState: signature mismatch"}

func addClientTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "test_sampling", Description: "Asks the client's model to answer a prompt"},
		func(_ context.Context, req *mcp.CallToolRequest, in struct {
			Prompt string `json:"prompt"`
		}) (*mcp.CallToolResult, any, error) {
			if t, ok := sampled(req.Params.InputResponses, "answer"); ok {
				return text("LLM response: %s", t), nil, nil
			}
			return ask(mcp.InputRequestMap{"answer": sample(in.Prompt, 100)}, ""), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "test_elicitation", Description: "Asks the user for a username"},
		func(_ context.Context, req *mcp.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*mcp.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["user"].(*mcp.ElicitResult); ok && r != nil {
				content, _ := json.Marshal(r.Content)
				return text("User response: action=%s, content=%s", r.Action, content), nil, nil
			}
			return ask(mcp.InputRequestMap{"user": elicit(in.Message, objectSchema("username"))}, ""), nil, nil
		})
	elicitOnce := func(name, desc, key string, schema json.RawMessage) {
		tool(srv, name, desc, func(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses[key].(*mcp.ElicitResult); ok && r != nil {
				content, _ := json.Marshal(r.Content)
				return text("Elicitation completed: action=%s, content=%s", r.Action, content), nil, nil
			}
			return ask(mcp.InputRequestMap{key: elicit(desc, schema)}, ""), nil, nil
		})
	}
	elicitOnce("test_elicitation_sep1034_defaults", "Asks for fields that all have defaults (SEP-1034)", "defaults", json.RawMessage(`{
		"type": "object",
		"properties": {
			"name": {"type": "string", "default": "John Doe"},
			"age": {"type": "integer", "default": 30},
			"score": {"type": "number", "default": 95.5},
			"status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
			"verified": {"type": "boolean", "default": true}
		}}`))
	elicitOnce("test_elicitation_sep1330_enums", "Asks with each kind of enum schema (SEP-1330)", "enums", json.RawMessage(`{
		"type": "object",
		"properties": {
			"untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
			"titledSingle": {"type": "string", "oneOf": [
				{"const": "value1", "title": "First Option"},
				{"const": "value2", "title": "Second Option"},
				{"const": "value3", "title": "Third Option"}]},
			"legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
				"enumNames": ["Option One", "Option Two", "Option Three"]},
			"untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
			"titledMulti": {"type": "array", "items": {"anyOf": [
				{"const": "value1", "title": "First Choice"},
				{"const": "value2", "title": "Second Choice"},
				{"const": "value3", "title": "Third Choice"}]}}
		}}`))
}

// addInputRequiredTools registers the tools of the input-required-result
// scenarios (SEP-2322).
func addInputRequiredTools(srv *mcp.Server) {
	tool(srv, "test_input_required_result_elicitation", "Asks the user's name, then greets them", greet)
	tool(srv, "test_input_required_result_sampling", "Asks the client's model a question", func(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		if t, ok := sampled(req.Params.InputResponses, "capital_question"); ok {
			return text("Sampling response: %s", t), nil, nil
		}
		return ask(mcp.InputRequestMap{"capital_question": sample("What is the capital of France?", 100)}, ""), nil, nil
	})
	tool(srv, "test_input_required_result_list_roots", "Asks for the client's roots", func(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		if r, ok := req.Params.InputResponses["client_roots"].(*mcp.ListRootsResult); ok && r != nil {
			return text("Client exposed %d root(s): %s", len(r.Roots), rootURIs(r)), nil, nil
		}
		return ask(mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}, ""), nil, nil
	})
	confirm := func(name, desc string) {
		tool(srv, name, desc, func(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			if st := req.Params.RequestState; st != "" {
				if _, ok := unseal(st); !ok {
					return nil, nil, badState
				}
				if accepted(req.Params.InputResponses, "confirm") != nil {
					return text("state-ok: requestState received and confirmation accepted"), nil, nil
				}
			}
			schema := json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)
			return ask(mcp.InputRequestMap{"confirm": elicit("Please confirm", schema)}, seal("confirm")), nil, nil
		})
	}
	confirm("test_input_required_result_request_state", "Asks for a confirmation, carrying a signed requestState")
	confirm("test_input_required_result_tampered_state", "Refuses a requestState it did not sign")
	tool(srv, "test_input_required_result_multiple_inputs", "Asks for a name, a greeting and the roots at once", func(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		in := req.Params.InputResponses
		name := field(in, "user_name", "name")
		greeting, sampledOK := sampled(in, "greeting")
		roots, rootsOK := in["client_roots"].(*mcp.ListRootsResult)
		if name != "" && sampledOK && rootsOK && roots != nil {
			return text("%s %s, %d root(s) visible", greeting, name, len(roots.Roots)), nil, nil
		}
		return ask(mcp.InputRequestMap{
			"user_name":    elicit("What is your name?", objectSchema("name")),
			"greeting":     sample("Generate a greeting", 50),
			"client_roots": &mcp.ListRootsParams{},
		}, seal("multiple")), nil, nil
	})
	tool(srv, "test_input_required_result_multi_round", "Asks a name, then a colour, over two rounds", multiRound)
	tool(srv, "test_input_required_result_capabilities", "Asks only for inputs the client's capabilities allow", byCapability)
}

// greet asks for the user's name until an accepted answer carries one.
func greet(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	if name := field(req.Params.InputResponses, "user_name", "name"); name != "" {
		return text("Hello, %s!", name), nil, nil
	}
	return ask(mcp.InputRequestMap{"user_name": elicit("What is your name?", objectSchema("name"))}, ""), nil, nil
}

func rootURIs(r *mcp.ListRootsResult) string {
	uris := make([]string, len(r.Roots))
	for i, root := range r.Roots {
		uris[i] = root.URI
	}
	return strings.Join(uris, ", ")
}

// multiRound keeps the round and the name of round 1 in its signed state.
func multiRound(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	in := req.Params.InputResponses
	if req.Params.RequestState == "" {
		return ask(mcp.InputRequestMap{"step1": elicit("Step 1: What is your name?", objectSchema("name"))}, seal("round1")), nil, nil
	}
	st, ok := unseal(req.Params.RequestState)
	if !ok {
		return nil, nil, badState
	}
	if st == "round1" {
		name := cmp.Or(field(in, "step1", "name"), "unknown")
		return ask(mcp.InputRequestMap{"step2": elicit("Step 2: What is your favorite color?", objectSchema("color"))}, seal("round2:"+name)), nil, nil
	}
	name := strings.TrimPrefix(st, "round2:")
	return text("Multi-round complete: %s likes %s", name, cmp.Or(field(in, "step2", "color"), "unknown")), nil, nil
}

// byCapability asks for an elicitation, a sampling and the roots only as
// far as the request's client capabilities declare them.
func byCapability(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	if len(req.Params.InputResponses) > 0 {
		return text("Capability-aware input requests fulfilled"), nil, nil
	}
	caps := req.ClientCapabilities()
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	inputs := mcp.InputRequestMap{}
	if caps.Elicitation != nil {
		inputs["user_name"] = elicit("What is your name?", objectSchema("name"))
	}
	if caps.Sampling != nil {
		inputs["greeting"] = sample("Generate a short greeting", 50)
	}
	if caps.RootsV2 != nil || caps.Roots.ListChanged {
		inputs["client_roots"] = &mcp.ListRootsParams{}
	}
	if len(inputs) == 0 {
		return text("The client declared no capability an input request needs"), nil, nil
	}
	return ask(inputs, ""), nil, nil
}

// contextPrompt is the prompts/get analogue of greet: it asks for context
// first.
func contextPrompt(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	if c := accepted(req.Params.InputResponses, "user_context"); c != nil {
		return &mcp.GetPromptResult{Description: "A prompt with elicited context", Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("Context: %v", c["context"])}},
		}}, nil
	}
	return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{
		"user_context": elicit("Please provide context for the prompt", objectSchema("context")),
	}}, nil
}
