package testkit

import "github.com/modelcontextprotocol/go-sdk/mcp"

// HasTool reports whether the tools/list result r lists a tool called name.
func HasTool(r *mcp.ListToolsResult, name string) bool {
	for _, tool := range r.Tools {
		if tool.Name == name {
			return true
		}
	}
	return false
}
