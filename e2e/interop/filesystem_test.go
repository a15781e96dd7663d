package interop

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tinyPNG is a 1×1 PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

func filesystemConversation(t *testing.T, transport mcp.Transport, dir string) *transcript {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr := &transcript{}
	client := mcp.NewClient(&mcp.Implementation{Name: "interop-fs", Version: "1.0.0"}, nil)
	// The server replaces its allowed directories with the client's roots.
	client.AddRoots(&mcp.Root{URI: "file://" + dir, Name: "work"})
	cs, err := client.Connect(ctx, transport, nil)
	must(t, "connect", err)
	defer cs.Close()
	tr.add(t, "initialize", cs.InitializeResult())
	tools, err := cs.ListTools(ctx, nil)
	must(t, "tools/list", err)
	tr.add(t, "tools/list", tools)

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		must(t, "tools/call "+name, err)
		tr.add(t, "tools/call "+name, res)
		return res
	}
	// Roots arrive asynchronously after initialization.
	for deadline := time.Now().Add(20 * time.Second); ; {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_allowed_directories", Arguments: map[string]any{}})
		must(t, "list_allowed_directories", err)
		if strings.Contains(textOf(res), dir) && !strings.Contains(textOf(res), "seed") {
			tr.add(t, "list_allowed_directories", res)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never took the client's root: %s", textOf(res))
		}
		time.Sleep(50 * time.Millisecond)
	}
	note := filepath.Join(dir, "notes", "a.txt")
	call("create_directory", map[string]any{"path": filepath.Join(dir, "notes")})
	call("write_file", map[string]any{"path": note, "content": "line one\nline two — ü\n"})
	if res := call("read_text_file", map[string]any{"path": note}); !strings.Contains(textOf(res), "line two — ü") {
		t.Errorf("read_text_file: %s", textOf(res))
	}
	call("edit_file", map[string]any{"path": note, "dryRun": true, "edits": []map[string]any{{"oldText": "line one", "newText": "line 1"}}})
	call("list_directory", map[string]any{"path": dir})
	call("directory_tree", map[string]any{"path": dir})
	call("search_files", map[string]any{"path": dir, "pattern": "*.txt"})
	if res := call("read_media_file", map[string]any{"path": filepath.Join(dir, "pixel.png")}); res == nil || !hasImage(res) {
		t.Errorf("read_media_file: no image content")
	}
	if res := call("read_text_file", map[string]any{"path": filepath.Join(dir, "missing.txt")}); !res.IsError {
		t.Errorf("reading a missing file: want isError")
	}
	if res := call("read_text_file", map[string]any{"path": "/etc/hostname"}); !res.IsError {
		t.Errorf("reading outside the roots: want isError")
	}
	return tr
}

// TestFilesystemThroughWrap runs the filesystem server directly and
// through `hindsight wrap` on the same directory.
func TestFilesystemThroughWrap(t *testing.T) {
	skipShort(t)
	fs := testbin.NPM(t, "mcp-server-filesystem")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	must(t, "temp dir", err)
	png, _ := base64.StdEncoding.DecodeString(tinyPNG)
	must(t, "write png", os.WriteFile(filepath.Join(dir, "pixel.png"), png, 0o600))
	seed := filepath.Join(t.TempDir(), "seed") // replaced by the client's root
	must(t, "seed dir", os.Mkdir(seed, 0o700))

	direct := filesystemConversation(t, &mcp.CommandTransport{Command: exec.Command(fs, seed)}, dir)
	proxied := filesystemConversation(t, &mcp.CommandTransport{Command: wrapped(t, "filesystem", fs, seed)}, dir)
	compare(t, direct, proxied)
}
