package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// CopilotServer is the server name given to LiveMCPBench's retrieval tool
// (route), which its agent calls to discover the tools of all servers.
const CopilotServer = "mcp-copilot"

// LiveMCPBench reads a LiveMCPBench run (baseline/output/*.json: a list of
// tasks, each with the chat messages of its agent). The agent reaches
// every MCP server through two tools of one proxy: route (find tools) and
// execute-tool (server_name, tool_name, params). A call of execute-tool
// becomes a call of the tool it names on the server it names, with the
// proxy's own error prefix removed; a route call stays a call of route.
func LiveMCPBench(data []byte) ([]Task, error) {
	var runs []struct {
		TaskID   string `json:"task_id"`
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(data, &runs); err != nil {
		return nil, fmt.Errorf("read LiveMCPBench run: %w", err)
	}
	var tasks []Task
	for _, r := range runs {
		t := Task{ID: "livemcpbench-" + r.TaskID}
		pending := map[string]Call{}
		for _, m := range r.Messages {
			for _, tc := range m.ToolCalls {
				c, ok := liveCall(tc.Function.Name, tc.Function.Arguments)
				if ok {
					pending[tc.ID] = c
				}
			}
			if m.Role != "tool" {
				continue
			}
			c, ok := pending[m.ToolCallID]
			content, isString := m.Content.(string)
			if !ok || !isString {
				continue
			}
			delete(pending, m.ToolCallID)
			liveResult(&c, content)
			t.Calls = append(t.Calls, c)
		}
		if len(t.Calls) > 0 {
			tasks = append(tasks, t)
		}
	}
	return tasks, nil
}

// liveCall is the call a LiveMCPBench tool call stands for.
func liveCall(name, arguments string) (Call, bool) {
	switch name {
	case "route":
		if !json.Valid([]byte(arguments)) {
			return Call{}, false
		}
		return Call{Server: CopilotServer, Tool: "route", Args: json.RawMessage(arguments)}, true
	case "execute-tool":
		var a struct {
			Server string          `json:"server_name"`
			Tool   string          `json:"tool_name"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal([]byte(arguments), &a); err != nil || a.Server == "" || a.Tool == "" {
			return Call{}, false
		}
		args := a.Params
		if len(args) == 0 || args[0] != '{' {
			args = json.RawMessage("{}")
		}
		return Call{Server: a.Server, Tool: a.Tool, Args: args}, true
	}
	return Call{}, false
}

// proxyPrefix starts the errors of LiveMCPBench's proxy when the server
// it called raised instead of answering.
const proxyPrefix = "Error executing tool execute-tool: "

// liveResult sets c's result from the tool message content: the server's
// own CallToolResult when the proxy passed it on as JSON, else its text.
func liveResult(c *Call, content string) {
	text, isError, err := pyCallResult(content)
	if err != nil {
		text, isError = content, strings.HasPrefix(content, "Error")
	}
	if rest, ok := strings.CutPrefix(text, proxyPrefix); ok {
		text, isError = rest, true
	}
	if r, ok := asToolResult(text); ok {
		var b bytes.Buffer
		if json.Compact(&b, []byte(text)) == nil && b.Len() <= maxResult {
			c.Result = b.Bytes()
		}
		c.Text, c.IsError = r.joined(), *r.IsError
		return
	}
	c.Text, c.IsError = text, isError
}
