package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// AllowWrites sends calls that may change state: of tools the live
	// server does not annotate readOnlyHint, or annotates destructiveHint.
	AllowWrites bool
	// Ignore are gjson paths, in a tools/call result, removed from both
	// sides before they are compared ("structuredContent.id",
	// "content.#.annotations").
	Ignore []string
	// KeepVolatile turns off the masking of timestamps and UUIDs in text
	// and structured content.
	KeepVolatile bool
}

// Step statuses of a verify report.
const (
	StatusSame          = "same"
	StatusDifferent     = "different"
	StatusNotReplayable = "not_replayable" // redacted arguments or truncated answer: not sent
	StatusSkipped       = "skipped"        // may change state and writes are not allowed: not sent
)

// Diff is one difference between the recorded and the live answer.
type Diff struct {
	Field    string `json:"field"` // "is_error", "error_code", "content", "structured_content"
	Recorded string `json:"recorded"`
	Live     string `json:"live"`
}

// StepReport is what Verify found for one recorded call.
type StepReport struct {
	Step   int    `json:"step"`
	Tool   string `json:"tool"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	Diffs  []Diff `json:"diffs,omitempty"`
}

// Report is the result of Verify.
type Report struct {
	Server        string       `json:"server"`
	Steps         []StepReport `json:"steps"`
	Same          int          `json:"same"`
	Different     int          `json:"different"`
	NotReplayable int          `json:"not_replayable"`
	Skipped       int          `json:"skipped"`
}

// Summary is the report's one-line summary.
func (r *Report) Summary() string {
	return fmt.Sprintf("%d calls: %d same, %d different, %d not replayable, %d skipped (writes)",
		len(r.Steps), r.Same, r.Different, r.NotReplayable, r.Skipped)
}

// OK reports whether no call differed.
func (r *Report) OK() bool { return r.Different == 0 }

// DialStdio starts command (with args) and returns an mcp-go client of it,
// its stderr going to stderr (nil: discarded).
func DialStdio(command string, args []string, env []string, stderr interface{ Write([]byte) (int, error) }) (*client.Client, error) {
	var opts []transport.StdioOption
	if stderr != nil {
		opts = append(opts, transport.WithCommandStderrWriter(stderr))
	}
	c, err := client.NewStdioMCPClientWithOptions(command, env, args, opts...)
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	return c, nil
}

// DialHTTP returns an mcp-go client of the Streamable HTTP server at url.
func DialHTTP(ctx context.Context, url string) (*client.Client, error) {
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		return nil, fmt.Errorf("dial server: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("start client: %w", err)
	}
	return c, nil
}

// Verify sends the recorded calls of rec to the live server behind c (an
// mcp-go client, started, not initialized) and reports, per call, how the
// answer differs: isError, JSON-RPC error code, the text of text content
// items, structuredContent. Timestamps and UUIDs in them are masked
// unless opt.KeepVolatile; opt.Ignore paths are removed.
//
// A call whose recorded arguments were redacted is not sent (they would
// be sent with placeholders), nor one whose recorded answer was
// truncated. Unless opt.AllowWrites, a call is sent only when the live
// server annotates its tool readOnlyHint and not destructiveHint.
func Verify(ctx context.Context, rec *Recording, c *client.Client, opt VerifyOptions) (*Report, error) {
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "hindsight-replay-verify", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("initialize server: %w", err)
	}
	readOnly := map[string]bool{}
	if tools, err := listAllTools(ctx, c); err == nil {
		for _, t := range tools {
			ro := t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
			destructive := t.Annotations.DestructiveHint != nil && *t.Annotations.DestructiveHint
			readOnly[t.Name] = ro && !destructive
		}
	}
	rep := &Report{Server: rec.Server}
	for i, call := range rec.Calls {
		sr := StepReport{Step: call.Step, Tool: call.Tool}
		switch {
		case call.Redacted:
			sr.Status, sr.Reason = StatusNotReplayable, "its arguments were redacted when recorded"
		case call.Truncated:
			sr.Status, sr.Reason = StatusNotReplayable, "its recorded answer was truncated"
		case !opt.AllowWrites && !readOnly[call.Tool]:
			sr.Status, sr.Reason = StatusSkipped, "may change state (the server does not annotate it readOnlyHint); --allow-writes sends it"
		default:
			live, err := send(ctx, c, i, call)
			if err != nil {
				return nil, fmt.Errorf("call %s (step %d): %w", call.Tool, call.Step, err)
			}
			sr.Diffs = compare(call, live, opt)
			sr.Status = StatusSame
			if len(sr.Diffs) > 0 {
				sr.Status = StatusDifferent
			}
		}
		switch sr.Status {
		case StatusSame:
			rep.Same++
		case StatusDifferent:
			rep.Different++
		case StatusNotReplayable:
			rep.NotReplayable++
		case StatusSkipped:
			rep.Skipped++
		}
		rep.Steps = append(rep.Steps, sr)
	}
	return rep, nil
}

func listAllTools(ctx context.Context, c *client.Client) ([]mcp.Tool, error) {
	var all []mcp.Tool
	req := mcp.ListToolsRequest{}
	for range 100 {
		res, err := c.ListTools(ctx, req)
		if err != nil {
			return nil, err
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		req.Params.Cursor = res.NextCursor
	}
	return all, nil
}

// send makes the call again and returns the live answer.
func send(ctx context.Context, c *client.Client, i int, call *Call) (*transport.JSONRPCResponse, error) {
	params := map[string]any{"name": call.Tool}
	if len(call.Arguments) > 0 {
		params["arguments"] = json.RawMessage(call.Arguments)
	}
	return c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(fmt.Sprintf("verify-%d", i)),
		Method:  "tools/call",
		Params:  params,
	})
}

// compare lists how live differs from the recorded call.
func compare(call *Call, live *transport.JSONRPCResponse, opt VerifyOptions) []Diff {
	var diffs []Diff
	recCode, liveCode := "", ""
	if call.Error != nil {
		recCode = fmt.Sprint(call.Error.Code)
	}
	if live.Error != nil {
		liveCode = fmt.Sprint(live.Error.Code)
	}
	if recCode != liveCode {
		diffs = append(diffs, Diff{"error_code", orNone(recCode), orNone(liveCode)})
	}
	if call.Error != nil || live.Error != nil {
		return diffs
	}
	recRes, liveRes := clean(call.Result, opt), clean(live.Result, opt)
	if r, l := gjson.GetBytes(recRes, "isError").Bool(), gjson.GetBytes(liveRes, "isError").Bool(); r != l {
		diffs = append(diffs, Diff{"is_error", fmt.Sprint(r), fmt.Sprint(l)})
	}
	if r, l := texts(recRes, opt), texts(liveRes, opt); r != l {
		diffs = append(diffs, Diff{"content", r, l})
	}
	r, l := gjson.GetBytes(recRes, "structuredContent"), gjson.GetBytes(liveRes, "structuredContent")
	if rs, ls := canonical(r, opt), canonical(l, opt); rs != ls {
		diffs = append(diffs, Diff{"structured_content", orNone(rs), orNone(ls)})
	}
	return diffs
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// clean removes the ignored paths from a result.
func clean(result json.RawMessage, opt VerifyOptions) json.RawMessage {
	out := []byte(result)
	for _, p := range opt.Ignore {
		for range 1000 { // a path with # may match many
			if !gjson.GetBytes(out, p).Exists() {
				break
			}
			b, err := sjson.DeleteBytes(out, p)
			if err != nil || string(b) == string(out) {
				break
			}
			out = b
		}
	}
	return out
}

// texts joins the text of a result's text content items.
func texts(result json.RawMessage, opt VerifyOptions) string {
	var parts []string
	gjson.GetBytes(result, "content").ForEach(func(_, c gjson.Result) bool {
		if c.Get("type").String() == "text" {
			parts = append(parts, mask(c.Get("text").String(), opt))
		} else {
			parts = append(parts, "<"+c.Get("type").String()+">")
		}
		return true
	})
	return strings.Join(parts, "\n")
}

// canonical is v as JSON with sorted members, volatile values masked.
func canonical(v gjson.Result, opt VerifyOptions) string {
	if !v.Exists() {
		return ""
	}
	var x any
	if err := json.Unmarshal([]byte(v.Raw), &x); err != nil {
		return v.Raw
	}
	b, _ := json.Marshal(maskValue(x, opt)) // encoding/json sorts map keys
	return string(b)
}

func maskValue(x any, opt VerifyOptions) any {
	switch v := x.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v[k] = maskValue(v[k], opt)
		}
	case []any:
		for i := range v {
			v[i] = maskValue(v[i], opt)
		}
	case string:
		return mask(v, opt)
	}
	return x
}

var (
	timestampRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?`)
	uuidRE      = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
)

// mask replaces timestamps and UUIDs in s, which differ from run to run.
func mask(s string, opt VerifyOptions) string {
	if opt.KeepVolatile {
		return s
	}
	s = timestampRE.ReplaceAllString(s, "<timestamp>")
	return uuidRE.ReplaceAllString(s, "<uuid>")
}
