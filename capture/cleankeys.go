package capture

// commonKeys are member names MCP messages and tool calls hold in nearly
// every message: JSON-RPC's, MCP's and those of common tool arguments and
// results.
var commonKeys = []string{
	"jsonrpc", "id", "method", "params", "result", "error", "code", "message", "data",
	"name", "arguments", "_meta", "progressToken", "progress", "total", "content", "type",
	"text", "isError", "structuredContent", "tools", "description", "inputSchema",
	"outputSchema", "properties", "required", "items", "enum", "default", "title",
	"annotations", "uri", "mimeType", "resource", "resources", "contents", "blob",
	"prompts", "messages", "role", "nextCursor", "cursor", "protocolVersion",
	"capabilities", "clientInfo", "serverInfo", "version", "instructions", "level",
	"logger", "requestId", "reason", "path", "paths", "query", "url", "command", "args",
	"file", "files", "line", "lines", "limit", "offset", "pattern", "matches", "count",
	"truncated", "status", "size", "format", "value", "values", "options", "model",
}

// cleanKeyTable holds common keys whose member scanKey would pass: not
// sensitive, and holding no keyword (or protocol plumbing, which is not
// searched). A key has two slots, next to each other: it takes the first
// free one, and one that finds neither free is left to the full check.
type cleanKeyTable [1 << 9]string

// cleanKeySlot hashes k's length, first, middle and last bytes to the
// first of its two slots (an even one).
func cleanKeySlot(k string) uint32 {
	n := len(k)
	w := uint32(k[0]) | uint32(k[n/2])<<8 | uint32(k[n-1])<<16 | uint32(n)<<24
	return w * 0x9E3779B1 >> 23 &^ 1
}

// has reports whether k is in the table: a plain key (ASCII without
// escapes) that scanKey passes.
func (t *cleanKeyTable) has(k string) bool {
	if k == "" {
		return false
	}
	i := cleanKeySlot(k)
	return t[i] == k || t[i+1] == k
}

// cleanKeys returns the table of r's clean common keys: those its full
// check passes (a user key can make a common one sensitive).
func (r *Redactor) cleanKeys() *cleanKeyTable {
	t := new(cleanKeyTable)
	for _, k := range commonKeys {
		if !r.keyClean(k, false, true) {
			continue
		}
		if i := cleanKeySlot(k); t[i] == "" {
			t[i] = k
		} else if t[i+1] == "" {
			t[i+1] = k
		}
	}
	return t
}

// keyClean is scanKey's full check of the decoded key s: its member's
// value is not sensitive, and s holds no keyword or is protocol plumbing
// ("progressToken", which redactJSON neither scans nor gives as context).
// plain says s is a plain token (ASCII without escapes), searched that
// the text holding it was searched already.
func (r *Redactor) keyClean(s string, searched, plain bool) bool {
	if r.sensitiveKey(s) != "" {
		return false
	}
	return plain && searched || notSensitive[normalizeKey(s)] || r.keywords.findText(s, plain) == 0
}
