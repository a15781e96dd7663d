package interop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func gosdkConversation(t *testing.T, cmd *exec.Cmd, version string) *transcript {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr := &transcript{}
	progress := make(chan *mcp.ProgressNotificationParams, 100)
	client := mcp.NewClient(&mcp.Implementation{Name: "interop-gosdk", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	must(t, "connect", err)
	defer cs.Close()
	init := cs.InitializeResult()
	tr.add(t, "handshake", init)
	if want := map[string]string{"": "2026-07-28", "2025-11-25": "2025-11-25"}[version]; init.ProtocolVersion != want {
		t.Errorf("protocol version %q, want %q", init.ProtocolVersion, want)
	}
	tools, err := cs.ListTools(ctx, nil)
	must(t, "tools/list", err)
	tr.add(t, "tools/list", tools)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
	must(t, "greet", err)
	tr.add(t, "greet", res)
	if res.StructuredContent == nil {
		t.Errorf("greet: no structured content")
	}
	params := &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"to": 3}}
	params.SetProgressToken("c")
	res, err = cs.CallTool(ctx, params)
	must(t, "count", err)
	tr.add(t, "count", res)
	got := progressOf(progress, 3)
	tr.add(t, "progress", got)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refuse", Arguments: map[string]any{}})
	must(t, "refuse", err)
	tr.add(t, "refuse", res)
	if !res.IsError {
		t.Errorf("refuse: want isError")
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	must(t, "prompts/list", err)
	tr.add(t, "prompts/list", prompts)
	p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "hello"})
	must(t, "prompts/get", err)
	tr.add(t, "prompts/get", p)
	r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fake://readme"})
	must(t, "resources/read", err)
	tr.add(t, "resources/read", r)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "no-such-tool"})
	tr.add(t, "unknown tool", fmt.Sprint(err))
	return tr
}

// TestGoSDKServerThroughWrap runs a server built with the official Go SDK,
// which speaks both spec eras, directly and through `hindsight wrap`: the
// 2026-07-28 conversation (server/discover, no initialize) and the
// 2025-11-25 one must look the same through the sidecar.
func TestGoSDKServerThroughWrap(t *testing.T) {
	skipShort(t)
	args := fakeserver.Args("TestInteropFakeServer")
	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = fakeserver.Env(fakeserver.ModeGoSDK, "", "")
			direct := gosdkConversation(t, cmd, version)
			cmd = wrapped(t, "gosdk", append([]string{os.Args[0]}, args...)...)
			cmd.Env = append(cmd.Env, fakeserver.Vars(fakeserver.ModeGoSDK, "", "")...)
			proxied := gosdkConversation(t, cmd, version)
			compare(t, direct, proxied)
		})
	}
}
