package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pngData is a 2×2 PNG image, audioData a WAV file of 8 silent samples.
var pngData, audioData = makePNG(), makeWAV()

func makePNG() []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.NRGBA{R: 255, A: 255})
	img.Set(1, 1, color.NRGBA{B: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// makeWAV returns a RIFF/WAVE file: 8 kHz, mono, 16-bit, 8 zero samples.
func makeWAV() []byte {
	const samples, rate = 8, 8000
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + 2*samples))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1)) // PCM
	le(uint16(1)) // channels
	le(uint32(rate))
	le(uint32(2 * rate)) // bytes per second
	le(uint16(2))        // block align
	le(uint16(16))       // bits per sample
	b.WriteString("data")
	le(uint32(2 * samples))
	b.Write(make([]byte, 2*samples))
	return b.Bytes()
}

// text is a tool result of one text block.
func text(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// fixed returns a tool handler that always answers res.
func fixed(res *mcp.CallToolResult) mcp.ToolHandlerFor[any, any] {
	return func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return res, nil, nil
	}
}

// tool registers a tool whose arguments are not checked.
func tool(srv *mcp.Server, name, desc string, h mcp.ToolHandlerFor[any, any]) {
	mcp.AddTool(srv, &mcp.Tool{Name: name, Description: desc}, h)
}

// addContentTools registers the tools that answer with content of each kind,
// report progress or logs, fail, or exercise the HTTP transport.
func addContentTools(srv *mcp.Server) {
	tool(srv, "test_simple_text", "Returns one text block", fixed(text("This is a simple text response for testing.")))
	tool(srv, "test_image_content", "Returns one PNG image", fixed(&mcp.CallToolResult{Content: []mcp.Content{
		&mcp.ImageContent{Data: pngData, MIMEType: "image/png"}}}))
	tool(srv, "test_audio_content", "Returns one WAV clip", fixed(&mcp.CallToolResult{Content: []mcp.Content{
		&mcp.AudioContent{Data: audioData, MIMEType: "audio/wav"}}}))
	tool(srv, "test_embedded_resource", "Returns an embedded text resource", fixed(&mcp.CallToolResult{Content: []mcp.Content{
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}}}))
	tool(srv, "test_multiple_content_types", "Returns text, an image and a resource", fixed(&mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "Multiple content types test:"},
		&mcp.ImageContent{Data: pngData, MIMEType: "image/png"},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}}}}))
	tool(srv, "test_tool_with_logging", "Logs three messages while it runs", withLogging)
	tool(srv, "test_tool_with_progress", "Reports progress 0, 50 and 100 of 100", withProgress)
	tool(srv, "test_error_handling", "Always fails with a tool error", func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("this tool intentionally returns an error for testing")
	})
	tool(srv, "test_reconnection", "Closes its SSE stream before answering, so the client must resume it", reconnect)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "json_schema_2020_12_tool",
		Description: "Takes a JSON Schema 2020-12 input schema that must reach the client unchanged",
		InputSchema: json.RawMessage(schema202012),
	}, func(_ context.Context, _ *mcp.CallToolRequest, in json.RawMessage) (*mcp.CallToolResult, any, error) {
		return text("received %s", in), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "test_x_mcp_header",
		Description: "Mirrors its region argument into the Mcp-Param-Region header",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"region":{"type":"string","x-mcp-header":"Region"},"level":{"type":"integer"}}}`),
	}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Region string `json:"region,omitempty"`
		Level  int    `json:"level,omitempty"`
	}) (*mcp.CallToolResult, any, error) {
		return text("region=%s level=%d", in.Region, in.Level), nil, nil
	})
	tool(srv, "test_missing_capability", "Needs the sampling client capability", needsSampling)
	tool(srv, "test_streaming_elicitation", "Answers on its response stream with the result only", fixed(text("result only, no requests on the stream")))
	tool(srv, "test_logging_tool", "Logs one message; dropped unless the request asked for logs", func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "test_logging_tool ran"})
		return text("logged if asked to"), nil, nil
	})
	tool(srv, "test_trigger_tool_change", "Adds a tool, so that tools/list_changed is sent", func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		tool(srv, "transient_tool", "Added by test_trigger_tool_change", fixed(text("transient")))
		return text("tool list changed"), nil, nil
	})
	tool(srv, "test_trigger_prompt_change", "Adds a prompt, so that prompts/list_changed is sent", func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		srv.AddPrompt(&mcp.Prompt{Name: "transient_prompt", Description: "Added by test_trigger_prompt_change"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
		return text("prompt list changed"), nil, nil
	})
}

// schema202012 uses the 2020-12 vocabulary: $schema, $defs with an $anchor,
// $ref, allOf/anyOf, if/then/else and additionalProperties.
const schema202012 = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"$defs": {"address": {"$anchor": "addressDef", "type": "object",
		"properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
	"properties": {
		"name": {"type": "string"},
		"address": {"$ref": "#/$defs/address"},
		"contactMethod": {"type": "string", "enum": ["phone", "email"]},
		"phone": {"type": "string"},
		"email": {"type": "string"}
	},
	"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
	"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
	"then": {"required": ["phone"]},
	"else": {"required": ["email"]},
	"additionalProperties": false
}`

func withLogging(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	for _, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: msg})
	}
	return text("Tool with logging executed successfully"), nil, nil
}

func withProgress(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	token := req.Params.GetProgressToken()
	if token != nil {
		for _, p := range []float64{0, 50, 100} {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: p, Total: 100, Message: fmt.Sprintf("%.0f of 100", p),
			})
		}
	}
	return text("%v", token), nil, nil
}

// reconnect closes the request's SSE stream (asking the client to come back
// after 10 ms) and answers once the client had time to resume it.
func reconnect(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	if req.Extra != nil && req.Extra.CloseSSEStream != nil {
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
	}
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(100 * time.Millisecond):
	}
	return text("Reconnection test completed successfully"), nil, nil
}

// needsSampling answers MissingRequiredClientCapability (naming sampling)
// unless the request's client declared sampling.
func needsSampling(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	if caps := req.ClientCapabilities(); caps != nil && caps.Sampling != nil {
		return text("the client can sample"), nil, nil
	}
	data, err := json.Marshal(mcp.MissingRequiredClientCapabilityData{
		RequiredCapabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("encode error data: %w", err)
	}
	return nil, nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "this tool needs the sampling capability", Data: data}
}

// addResources registers two static resources, a template and the watched
// resource.
func addResources(srv *mcp.Server) {
	one := func(c *mcp.ResourceContents) mcp.ResourceHandler {
		return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			cc := *c
			cc.URI = req.Params.URI
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{&cc}}, nil
		}
	}
	srv.AddResource(&mcp.Resource{Name: "static-text", URI: "test://static-text", MIMEType: "text/plain", Description: "A fixed text"},
		one(&mcp.ResourceContents{MIMEType: "text/plain", Text: "This is the content of the static text resource."}))
	srv.AddResource(&mcp.Resource{Name: "static-binary", URI: "test://static-binary", MIMEType: "image/png", Description: "A fixed PNG image"},
		one(&mcp.ResourceContents{MIMEType: "image/png", Blob: pngData}))
	srv.AddResource(&mcp.Resource{Name: "watched-resource", URI: watchedURI, MIMEType: "text/plain", Description: "Announced as updated every 3 seconds"},
		one(&mcp.ResourceContents{MIMEType: "text/plain", Text: "Watched resource content"}))
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "template", URITemplate: "test://template/{id}/data", MIMEType: "application/json", Description: "Data for an id"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			body, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			if err != nil {
				return nil, fmt.Errorf("encode template data: %w", err)
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(body)}}}, nil
		})
}

// addPrompts registers the prompts, the input-required one included.
func addPrompts(srv *mcp.Server) {
	user := func(c mcp.Content) *mcp.PromptMessage { return &mcp.PromptMessage{Role: "user", Content: c} }
	srv.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Title: "Simple prompt", Description: "A prompt without arguments"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{user(&mcp.TextContent{Text: "This is a simple prompt for testing."})}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt with arguments", Description: "A prompt of two arguments",
		Arguments: []*mcp.PromptArgument{{Name: "arg1", Description: "First argument", Required: true}, {Name: "arg2", Description: "Second argument", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{user(&mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])})}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt with a resource", Description: "A prompt embedding the resource it is given",
		Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				user(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."}}),
				user(&mcp.TextContent{Text: "Please process the embedded resource above."}),
			}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt with an image", Description: "A prompt showing an image"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				user(&mcp.ImageContent{Data: pngData, MIMEType: "image/png"}),
				user(&mcp.TextContent{Text: "Please analyze the image above."}),
			}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "Asks the client for context before it answers"}, contextPrompt)
}

// complete offers no completions: the scenarios check the result's shape.
func complete(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
}
