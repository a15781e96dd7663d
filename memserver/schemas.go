package memserver

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// The tools' input and output schemas (JSON Schema 2020-12). The outputs
// describe the structuredContent of a successful result; a failed call is
// an isError result with text only.

var storeEpisodeIn = json.RawMessage(`{
  "type": "object",
  "properties": {
    "task_id": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Your task's id; the same id in _meta[\"io.hindsight/task\"] of MCP requests puts them in the same task."},
    "step_index": {"type": "integer", "minimum": 0, "description": "This episode's index among the task's episodes (0, 1, 2…). The same task and index is stored once; omit it to take the next index."},
    "action": {"type": "string", "minLength": 1, "maxLength": 128, "description": "What was done: the name of the tool, command or function (e.g. \"shell\", \"browser.open\")."},
    "input": {"type": "object", "description": "The action's input, as a JSON object."},
    "observation": {"type": "string", "maxLength": 65536, "description": "What came back: the output, the page text, the error."},
    "failed": {"type": "boolean", "description": "True when the action failed."},
    "timestamp": {"type": "string", "format": "date-time", "description": "When it happened (RFC 3339); default: now."},
    "agent": {"type": "string", "maxLength": 128, "description": "Where the action ran (stored as the step's server); default \"agent\"."}
  },
  "required": ["task_id", "action", "observation"]
}`)

var storeEpisodeOut = json.RawMessage(`{
  "type": "object",
  "properties": {
    "task_id": {"type": "string"},
    "step_index": {"type": "integer", "minimum": 0},
    "duplicate": {"type": "boolean", "description": "The episode was stored before: nothing changed."},
    "redactions": {"type": "integer", "minimum": 0, "description": "Secrets removed before it was stored."}
  },
  "required": ["task_id", "step_index", "duplicate", "redactions"],
  "additionalProperties": false
}`)

var queryEpisodesIn = json.RawMessage(`{
  "type": "object",
  "properties": {
    "task_id": {"type": "string", "minLength": 1},
    "offset": {"type": "integer", "minimum": 0, "description": "The first step to return (default 0)."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "Steps per page (default 50)."}
  },
  "required": ["task_id"]
}`)

var queryEpisodesOut = json.RawMessage(`{
  "type": "object",
  "properties": {
    "task_id": {"type": "string"},
    "status": {"enum": ["open", "final", "reflected", "failed"]},
    "total": {"type": "integer", "minimum": 0},
    "offset": {"type": "integer", "minimum": 0},
    "next_offset": {"type": "integer", "minimum": 0},
    "steps": {"type": "array", "items": {
      "type": "object",
      "properties": {
        "step_index": {"type": "integer", "minimum": 0},
        "kind": {"enum": ["episode", "mcp"]},
        "server": {"type": "string"},
        "method": {"type": "string"},
        "tool": {"type": "string"},
        "started_at": {"type": "string", "format": "date-time"},
        "input": {},
        "observation": {"type": "string"},
        "is_error": {"type": "boolean"},
        "causal_tag": {"type": "string"},
        "redactions": {"type": "integer", "minimum": 0}
      },
      "required": ["step_index", "kind", "server", "method", "started_at", "is_error", "causal_tag", "redactions"],
      "additionalProperties": false
    }}
  },
  "required": ["task_id", "status", "total", "offset", "steps"],
  "additionalProperties": false
}`)

var triggerIn = json.RawMessage(`{
  "type": "object",
  "properties": {
    "task_id": {"type": "string", "minLength": 1, "description": "The finished task."},
    "wait": {"type": "boolean", "description": "Answer after the reflection, with its lessons (default: answer once it is queued)."}
  },
  "required": ["task_id"]
}`)

var triggerOut = json.RawMessage(`{
  "type": "object",
  "properties": {
    "task_id": {"type": "string"},
    "was_final": {"type": "boolean", "description": "The task had ended already."},
    "queued": {"type": "boolean", "description": "The task is in the reflection queue, or was reflected."},
    "reflection": {"enum": ["", "pending", "done", "failed"]},
    "waited": {"type": "boolean"},
    "lessons": {"type": "array", "items": {
      "type": "object",
      "properties": {
        "id": {"type": "string"},
        "server": {"type": "string"},
        "tool": {"type": "string"},
        "lesson": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "source_steps": {"type": "array", "items": {"type": "integer", "minimum": 0}}
      },
      "required": ["id", "server", "tool", "lesson", "confidence", "source_steps"],
      "additionalProperties": false
    }},
    "error": {"type": "string"}
  },
  "required": ["task_id", "was_final", "queued", "reflection", "waited", "lessons"],
  "additionalProperties": false
}`)

var queryIn = json.RawMessage(`{
  "type": "object",
  "properties": {
    "situation": {"type": "string", "description": "What you are about to do, or what just went wrong, in a sentence or two."},
    "query_text": {"type": "string", "description": "The same as situation."},
    "tool_name": {"type": "string", "description": "The tool you are about to call or that just failed, if any."},
    "task_type": {"type": "string", "description": "The kind of task, e.g. \"monthly billing\", if known."},
    "server": {"type": "string", "description": "Only experiences with this MCP server (default: any)."},
    "top_k": {"type": "integer", "minimum": 1, "maximum": 3, "description": "At most this many experiences (default and maximum 3)."}
  }
}`)

var queryOut = json.RawMessage(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The answer as a sidecar's query_hindsight gives it."},
    "experiences": {"type": "array", "maxItems": 3, "items": {
      "type": "object",
      "properties": {
        "id": {"type": "string"},
        "server": {"type": "string"},
        "tool": {"type": "string"},
        "lesson": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "evidence_count": {"type": "integer", "minimum": 1}
      },
      "required": ["id", "server", "tool", "lesson", "confidence", "evidence_count"],
      "additionalProperties": false
    }}
  },
  "required": ["text", "experiences"],
  "additionalProperties": false
}`)

var listTasksIn = json.RawMessage(`{
  "type": "object",
  "properties": {
    "status": {"enum": ["open", "final", "reflected", "failed", "any"], "description": "open: still running; final: ended, not reflected yet; reflected: lessons drawn; failed: reflection failed; any (default)."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "At most this many tasks (default 20)."}
  }
}`)

var listTasksOut = json.RawMessage(`{
  "type": "object",
  "properties": {
    "tasks": {"type": "array", "items": {
      "type": "object",
      "properties": {
        "id": {"type": "string"},
        "status": {"enum": ["open", "final", "reflected", "failed"]},
        "started_at": {"type": "string", "format": "date-time"},
        "ended_at": {"type": "string", "format": "date-time"},
        "servers": {"type": "array", "items": {"type": "string"}},
        "step_count": {"type": "integer", "minimum": 0},
        "failure_count": {"type": "integer", "minimum": 0}
      },
      "required": ["id", "status", "started_at", "ended_at", "servers", "step_count", "failure_count"],
      "additionalProperties": false
    }}
  },
  "required": ["tasks"],
  "additionalProperties": false
}`)

// withInput sets a tool's raw input schema in place of the default one
// mcp.NewTool sets (a tool may not carry both).
func withInput(schema json.RawMessage) mcp.ToolOption {
	return func(t *mcp.Tool) {
		t.InputSchema = mcp.ToolInputSchema{}
		t.RawInputSchema = schema
	}
}

func hints(readOnly, destructive, idempotent bool) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{
		ReadOnlyHint: &readOnly, DestructiveHint: &destructive, IdempotentHint: &idempotent, OpenWorldHint: new(false),
	})
}
