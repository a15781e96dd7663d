//go:build unix

package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// replayConversation is a conversation a recorded server can answer: no
// server-to-client requests, no progress, nothing that depends on time.
func replayConversation(t *testing.T, transport mcp.Transport, version string) *transcript {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr := &transcript{}
	c := mcp.NewClient(&mcp.Implementation{Name: "interop-replay", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	must(t, "connect", err)
	defer cs.Close()
	init := cs.InitializeResult()
	tr.add(t, "initialize", map[string]any{"serverInfo": init.ServerInfo, "instructions": init.Instructions, "capabilities": init.Capabilities})
	time.Sleep(300 * time.Millisecond) // the server may register tools after initialized
	tools, err := cs.ListTools(ctx, nil)
	must(t, "tools/list", err)
	tr.add(t, "tools/list", tools)
	addPrompts(ctx, t, cs, tr)
	resources, err := cs.ListResources(ctx, nil)
	must(t, "resources/list", err)
	tr.add(t, "resources/list", resources)
	if len(resources.Resources) > 0 {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: resources.Resources[0].URI})
		must(t, "resources/read", err)
		tr.add(t, "resources/read", r)
	}
	for _, call := range []struct {
		name string
		args map[string]any
	}{
		{"echo", map[string]any{"message": "héllo ✓"}},
		{"get-sum", map[string]any{"a": 2, "b": 40.5}},
		{"echo", map[string]any{"message": "again"}},
		{"echo", map[string]any{"message": "héllo ✓"}},
		{"get-tiny-image", map[string]any{}},
		{"get-structured-content", map[string]any{"location": "Chicago"}},
		{"get-sum", map[string]any{"a": "not a number"}},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: call.name, Arguments: call.args})
		if err != nil {
			tr.add(t, "tools/call "+call.name+" error", err.Error())
			continue
		}
		tr.add(t, "tools/call "+call.name, res)
	}
	return tr
}

// homeOf returns the HINDSIGHT_HOME a wrapped command runs with.
func homeOf(cmd *exec.Cmd) string {
	for _, e := range cmd.Env {
		if h, ok := strings.CutPrefix(e, "HINDSIGHT_HOME="); ok {
			return h
		}
	}
	return ""
}

// exportOnce waits until the daemon of home holds want tools/call steps
// of server and returns its export.
func exportOnce(t *testing.T, home, server string, want int) []byte {
	t.Helper()
	bin := testbin.Hindsight(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command(bin, "traces", "export")
		cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home)
		out, err := cmd.Output()
		n := 0
		for _, line := range bytes.Split(out, []byte("\n")) {
			var s struct{ Server, Method string }
			if json.Unmarshal(line, &s) == nil && s.Server == server && s.Method == "tools/call" {
				n++
			}
		}
		if err == nil && n >= want {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("export of %s: %d tools/call steps, want %d (err %v)", home, n, want, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestReplayRoundTrip records a session with the everything server through
// `hindsight wrap` (injection on), then: `replay serve` on its trace gives
// the same conversation the same answers as the server did directly, in
// both protocol eras and behind `hindsight wrap` itself; `replay verify`
// against the real server finds no differences; against a changed server
// it reports exactly the changed steps.
func TestReplayRoundTrip(t *testing.T) {
	skipShort(t)
	everything := testbin.NPM(t, "mcp-server-everything")
	bin := testbin.Hindsight(t)
	const version = "2025-11-25"

	direct := replayConversation(t, &mcp.CommandTransport{Command: exec.Command(everything, "stdio")}, version)
	rec := wrappedWith(t, false, "everything", everything, "stdio")
	home := homeOf(rec)
	replayConversation(t, &mcp.CommandTransport{Command: rec}, version)
	export := exportOnce(t, home, "everything", 7)
	dir := t.TempDir()
	file := filepath.Join(dir, "export.jsonl")
	must(t, "write export", os.WriteFile(file, export, 0o600))

	serve := func(file string) *exec.Cmd {
		cmd := exec.Command(bin, "replay", "serve", "--file", file, "--server", "everything")
		cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+t.TempDir())
		cmd.Stderr = os.Stderr
		return cmd
	}
	t.Run("serve", func(t *testing.T) {
		compare(t, direct, replayConversation(t, &mcp.CommandTransport{Command: serve(file)}, version))
	})
	t.Run("serve 2026-07-28", func(t *testing.T) {
		// The recording is of the 2025-11-25 era; a 2026-07-28 client
		// (server/discover) gets the same answers.
		// The era's envelope (resultType, the server's identity in _meta,
		// cache hints) is the stand-in's, per the spec; the rest is the
		// recorded answer.
		latest := replayConversation(t, &mcp.CommandTransport{Command: serve(file)}, "")
		compare(t, withoutEnvelope(t, direct), withoutEnvelope(t, latest))
	})
	t.Run("serve behind wrap", func(t *testing.T) {
		cmd := wrappedWith(t, true, "replayed", bin, "replay", "serve", "--file", file, "--server", "everything")
		compare(t, direct, replayConversation(t, &mcp.CommandTransport{Command: cmd}, version))
		exportOnce(t, homeOf(cmd), "replayed", 7) // the replay was recorded
	})

	verify := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append([]string{"replay", "verify", "--file", file, "--server", "everything"}, args...)...)
		cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+t.TempDir())
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("verify: %v", err)
		}
		return out.String() + errb.String(), code
	}
	t.Run("verify real server", func(t *testing.T) {
		out, code := verify("--allow-writes", "--", everything, "stdio")
		if code != 0 || !strings.Contains(out, "7 calls: 7 same, 0 different") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		// The everything server annotates these tools readOnlyHint: they
		// are sent without --allow-writes too.
		out, code = verify("--", everything, "stdio")
		if code != 0 || !strings.Contains(out, "7 same, 0 different") {
			t.Fatalf("without --allow-writes: exit %d:\n%s", code, out)
		}
	})
	t.Run("verify a stored task", func(t *testing.T) {
		// --task asks the daemon that recorded the session.
		var first struct {
			TaskID string `json:"task_id"`
		}
		must(t, "read task id", json.Unmarshal(export[:bytes.IndexByte(export, '\n')], &first))
		cmd := exec.Command(bin, "replay", "verify", "--task", first.TaskID, "--server", "everything", "--", everything, "stdio")
		cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "7 calls: 7 same, 0 different") {
			t.Fatalf("%v:\n%s", err, out)
		}
	})
	t.Run("serve and verify over HTTP", func(t *testing.T) {
		// replay serve --listen: a stand-in over Streamable HTTP, checked
		// by replay verify --upstream against its own recording.
		addr := make(chan string, 1)
		re := regexp.MustCompile(`at (http://\S+/mcp)`)
		startBackground(t, []string{"HINDSIGHT_HOME=" + t.TempDir()}, func(l string) {
			if m := re.FindStringSubmatch(l); m != nil {
				addr <- m[1]
			}
		}, bin, "replay", "serve", "--file", file, "--server", "everything", "--listen", "127.0.0.1:0")
		var url string
		select {
		case url = <-addr:
		case <-time.After(30 * time.Second):
			t.Fatal("replay serve --listen did not report its address")
		}
		out, code := verify("--upstream", url)
		if code != 0 || !strings.Contains(out, "7 calls: 7 same, 0 different") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("verify changed server", func(t *testing.T) {
		// The changed server: the recording with the answer of one call
		// edited, served by `replay serve`.
		changed := bytes.Replace(export, []byte(`Echo: again`), []byte(`Echo: changed`), -1)
		if bytes.Equal(changed, export) {
			t.Fatalf("the export has no answer to change:\n%s", export)
		}
		cfile := filepath.Join(dir, "changed.jsonl")
		must(t, "write changed", os.WriteFile(cfile, changed, 0o600))
		out, code := verify("--allow-writes", "--json", "--", bin, "replay", "serve", "--file", cfile, "--server", "everything")
		var rep struct {
			Different int
			Steps     []struct {
				Tool, Status string
				Diffs        []struct{ Field, Recorded, Live string }
			}
		}
		if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &rep); err != nil || code != 1 || rep.Different != 1 {
			t.Fatalf("exit %d, %v:\n%s", code, err, out)
		}
		for _, s := range rep.Steps {
			if s.Status == "different" && (s.Tool != "echo" || len(s.Diffs) != 1 || s.Diffs[0].Field != "content" || !strings.Contains(s.Diffs[0].Live, "changed")) {
				t.Errorf("changed step reported as %+v", s)
			}
		}
	})
}

// withoutEnvelope removes from each result what the 2026-07-28 era adds
// around it, and the cache hints the go-sdk fills in.
func withoutEnvelope(t *testing.T, tr *transcript) *transcript {
	out := &transcript{}
	for _, s := range tr.steps {
		var m map[string]any
		if json.Unmarshal([]byte(s.json), &m) != nil {
			out.steps = append(out.steps, s)
			continue
		}
		delete(m, "resultType")
		delete(m, "ttlMs")
		delete(m, "cacheScope")
		if meta, ok := m["_meta"].(map[string]any); ok {
			delete(meta, "io.modelcontextprotocol/serverInfo")
			if len(meta) == 0 {
				delete(m, "_meta")
			}
		}
		out.add(t, s.name, m)
	}
	return out
}
