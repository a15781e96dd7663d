package fakeserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ModeGoSDK serves MCP with the official Go SDK over stdio: a server that
// speaks both spec eras (server/discover for 2026-07-28, initialize for
// 2025-11-25), for tests of the newer era through the sidecar.
const ModeGoSDK = "gosdk"

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
	Length   int    `json:"length"`
}

type countIn struct {
	To int `json:"to" jsonschema:"count from 1 to this, with a progress notification per step"`
}

// serveGoSDK runs the Go SDK server until stdin ends.
func serveGoSDK(ctx context.Context) error {
	s := mcp.NewServer(&mcp.Implementation{Name: "gosdk-fake", Version: "1.0.0"},
		&mcp.ServerOptions{Instructions: "A server built with the Go SDK."})
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Greets someone, with structured output."},
		func(ctx context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, greetOut, error) {
			g := "Hello, " + in.Name + "!"
			return nil, greetOut{Greeting: g, Length: len(g)}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "Counts, reporting progress."},
		func(ctx context.Context, req *mcp.CallToolRequest, in countIn) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= in.To && tok != nil; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(i), Total: float64(in.To)}); err != nil {
					return nil, nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("counted to %d", in.To)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "refuse", Description: "Always fails."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("refused on purpose")
		})
	s.AddPrompt(&mcp.Prompt{Name: "hello", Description: "says hello"},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
		})
	s.AddResource(&mcp.Resource{Name: "readme", URI: "fake://readme", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "fake://readme", MIMEType: "text/plain", Text: "read me"}}}, nil
		})
	return s.Run(ctx, &mcp.StdioTransport{})
}
