package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/hindsight-proxy/hindsight/internal/defaults"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Initialize appends the top lessons for the session's server and a pointer
// to query_hindsight to the instructions of an initialize or server/discover
// result, creating the member when the server sent none. It waits for the
// lessons at most until ctx ends, then injects what it has.
func (in *Injector) Initialize(ctx context.Context, s *proxy.Session, result json.RawMessage) json.RawMessage {
	if in.NoInstructions {
		return nil
	}
	instr := gjson.GetBytes(result, "instructions")
	if instr.Exists() && instr.Type != gjson.String {
		return nil // not ours to fix
	}
	st := in.state(s)
	var lessons []hindsight.ScoredExperience
	if in.Source != nil {
		var err error
		if lessons, err = in.lessonsFor(ctx, s.Server); err != nil {
			in.logger().Debug("no lessons for instructions", "server", s.Server, "err", err)
		}
	}
	sep := "\n\n"
	if instr.Str == "" {
		sep = ""
	}
	pointer := in.pointer()
	budget := defaults.Positive(in.SessionBudget, DefaultSessionBudget)
	text, ids, tokens := "", []string(nil), 0
	for range 3 { // retried when a concurrent hook spent the budget first
		text, ids, tokens = in.instructionsBlock(sep, lessons, pointer, st.remaining(budget))
		if text == "" || st.spend(tokens, budget) {
			break
		}
		text = ""
	}
	if text == "" {
		return nil
	}
	out, err := sjson.SetBytes(result, "instructions", instr.Str+text)
	if err != nil {
		in.logger().Error("inject instructions", "err", err)
		return nil
	}
	st.addPending("init", hindsight.Injection{Channel: ChannelInstructions, ExperienceIDs: ids, Tokens: tokens})
	return out
}

// pointer is the fixed text the instructions carry when no lesson fits: the
// query_hindsight pointer and the end-of-task sentence, as configured.
func (in *Injector) pointer() string {
	var pointer string
	if !in.NoQueryTool {
		pointer = queryPointer
	}
	switch {
	case in.EndTaskTool:
		pointer = strings.TrimSpace(pointer + " " + endTaskToolHint)
	case in.EndTaskHint:
		pointer = strings.TrimSpace(pointer + " " + endTaskHint)
	}
	return pointer
}

// queryPointer is the line pointing the agent to the query tool.
const queryPointer = "Before a tool you are unsure of, and after an error, call the " + QueryToolName + " tool with the situation to get lessons from past runs."

// instructionsBlock builds the text appended to the instructions within
// limit tokens: lessons when any fit, else the pointer alone.
func (in *Injector) instructionsBlock(sep string, lessons []hindsight.ScoredExperience, pointer string, limit int) (string, []string, int) {
	perLesson := in.lineCap()
	var blocks []block
	seen := map[string]bool{}
	ranked := 0
	for i := range lessons {
		// A pinned lesson is offered whatever its confidence, beside the
		// MaxInstructionLessons ranked ones (the token budget still
		// bounds them all).
		pinned := lessons[i].Pinned && !lessons[i].Deleted
		if !pinned && (ranked == defaults.Positive(in.MaxInstructionLessons, DefaultMaxInstructionLessons) ||
			lessons[i].Confidence < defaults.Positive(in.MinConfidence, DefaultMinConfidence)) {
			continue
		}
		bl := lessonLine(&lessons[i], true, perLesson)
		if seen[bl.text] || oneLine(lessons[i].Lesson) == "" {
			continue
		}
		seen[bl.text] = true
		blocks = append(blocks, bl)
		if !pinned {
			ranked++
		}
	}
	footer := ""
	if pointer != "" {
		footer = "\n" + pointer
	}
	if text, ids, n := assemble(sep+Marker+" Lessons learned in past runs with this server:\n", blocks, "\n", footer, limit); text != "" {
		return text, ids, n
	}
	if pointer == "" {
		return "", nil, 0
	}
	text := sep + Marker + " " + pointer
	if n := CountTokens(text); n <= limit {
		return text, nil, n
	}
	return "", nil, 0
}

// lineCap is the token cap of one lesson line: MaxTokensPerLine, and never
// more than MaxTokensPerLesson.
func (in *Injector) lineCap() int {
	return min(defaults.Positive(in.MaxTokensPerLine, DefaultMaxTokensPerLine), defaults.Positive(in.MaxTokensPerLesson, DefaultMaxTokensPerLesson))
}

// ToolsList adds the query_hindsight tool (and, with EndTaskTool, the
// trigger_hindsight tool) to the last page of a tools/list result. When an
// upstream tool already has the name, query_hindsight takes the first free
// one of query_hindsight_2, query_hindsight_3… and logs the clash;
// trigger_hindsight is left out.
func (in *Injector) ToolsList(ctx context.Context, s *proxy.Session, result json.RawMessage) json.RawMessage {
	if in.NoQueryTool && !in.EndTaskTool {
		return nil
	}
	tools := gjson.GetBytes(result, "tools")
	if !tools.IsArray() {
		return nil
	}
	st := in.state(s)
	st.mu.Lock()
	if st.seen == nil {
		st.seen = make(map[string]bool)
	}
	for _, t := range tools.Array() {
		st.seen[t.Get("name").String()] = true
	}
	if c := gjson.GetBytes(result, "nextCursor"); c.Exists() && c.String() != "" {
		st.mu.Unlock()
		return nil // more pages follow; the tool goes on the last
	}
	name := QueryToolName
	for i := 2; st.seen[name]; i++ {
		name = fmt.Sprintf("%s_%d", QueryToolName, i)
	}
	endTool := in.EndTaskTool && !st.seen[EndToolName]
	if !in.NoQueryTool {
		st.toolName = name
	}
	st.endTool, st.seen = endTool, nil
	st.mu.Unlock()
	out := result
	if !in.NoQueryTool {
		if name != QueryToolName {
			in.logger().Warn("server has a tool named query_hindsight; Hindsight's is renamed", "server", s.Server, "name", name)
		}
		var err error
		if out, err = sjson.SetRawBytes(out, "tools.-1", queryTool(name)); err != nil {
			in.logger().Error("add query tool", "err", err)
			return nil
		}
	}
	if in.EndTaskTool && !endTool {
		in.logger().Warn("server has a tool named trigger_hindsight; Hindsight's is left out", "server", s.Server)
	}
	if endTool {
		var err error
		if out, err = sjson.SetRawBytes(out, "tools.-1", endToolJSON); err != nil {
			in.logger().Error("add trigger tool", "err", err)
			return nil
		}
	}
	return out
}

// EndToolName is the tool with which an agent ends its task in a sidecar
// (Injector.EndTaskTool).
const EndToolName = "trigger_hindsight"

// EndTaskText is the sidecar's answer to trigger_hindsight.
const EndTaskText = Marker + " Task ended: its lessons are being learned now."

// EndTaskDownText is the sidecar's answer to trigger_hindsight, as an
// error, when Hindsight's daemon does not answer (Injector.EndTaskCheck).
const EndTaskDownText = Marker + " Hindsight is unavailable right now (its daemon does not answer): no lessons are being learned now. " +
	"The task's end is kept with its steps and takes effect once the daemon runs; carry on, there is nothing to retry."

// endToolJSON is the definition of the trigger tool.
var endToolJSON = func() []byte {
	b, _ := json.Marshal(map[string]any{
		"name":  EndToolName,
		"title": "Trigger Hindsight",
		"description": "Say that your task is finished, so that Hindsight learns its lessons now instead of after a long idle time. " +
			"Call it once, after the task's last step.",
		"inputSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"task_id": map[string]any{"type": "string", "description": "The task's id, if you named it in _meta[\"io.hindsight/task\"]; default: this session's task."},
			},
		},
		"annotations": map[string]bool{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
	})
	return b
}()

// queryTool returns the JSON definition of the query tool called name.
func queryTool(name string) []byte {
	type prop struct {
		Type        string `json:"type"`
		Description string `json:"description"`
	}
	type schema struct {
		Type       string          `json:"type"`
		Properties map[string]prop `json:"properties"`
		Required   []string        `json:"required"`
	}
	tool := struct {
		Name        string          `json:"name"`
		Title       string          `json:"title"`
		Description string          `json:"description"`
		InputSchema schema          `json:"inputSchema"`
		Annotations map[string]bool `json:"annotations"`
	}{
		Name:  name,
		Title: "Query Hindsight",
		Description: "Hindsight's memory of past runs with this server: lessons learned from earlier failures and recoveries. " +
			"Call it before a tool you are unsure of, and after an error, describing the situation; " +
			"it answers with at most 3 past experiences, most relevant first, or says there is none.",
		InputSchema: schema{
			Type: "object",
			Properties: map[string]prop{
				"situation": {"string", "What you are about to do, or what just went wrong, in a sentence or two."},
				"tool_name": {"string", "The tool you are about to call or that just failed, if any."},
				"task_type": {"string", "The kind of task, e.g. \"monthly billing\", if known."},
			},
			Required: []string{"situation"},
		},
		Annotations: map[string]bool{"readOnlyHint": true, "openWorldHint": false},
	}
	b, _ := json.Marshal(tool)
	return b
}

// ToolCall answers calls of the session's query tool in the sidecar; every
// other call is forwarded.
//
// With EndTaskTool, calls of trigger_hindsight (when the sidecar listed it)
// are answered with EndTaskText, or with EndTaskDownText as an error when
// EndTaskCheck fails; the sidecar ends the task once the call
// is recorded (it sees the exchange as a local tools/call of EndToolName).
func (in *Injector) ToolCall(s *proxy.Session, name string, params json.RawMessage) proxy.LocalHandler {
	if in.EndTaskTool && name == EndToolName {
		st := in.state(s)
		st.mu.Lock()
		listed := st.endTool
		st.mu.Unlock()
		if !listed {
			return nil
		}
		return func(ctx context.Context) (json.RawMessage, error) {
			if in.EndTaskCheck != nil {
				if err := in.EndTaskCheck(ctx); err != nil {
					in.logger().Warn("trigger_hindsight with the daemon down", "err", err)
					return toolResult(EndTaskDownText, true), nil
				}
			}
			return toolResult(EndTaskText, false), nil
		}
	}
	if in.NoQueryTool || !strings.HasPrefix(name, QueryToolName) {
		return nil
	}
	st := in.state(s)
	if name != st.queryTool() {
		return nil
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		text, inj := in.answer(ctx, s, st, params)
		if inj != nil {
			st.addPending("call:"+string(params), *inj)
		}
		return toolResult(text, false), nil
	}
}

// answer runs a query_hindsight call and returns its text and what it
// injected (nil when no experience was shown).
func (in *Injector) answer(ctx context.Context, s *proxy.Session, st *session, params json.RawMessage) (string, *hindsight.Injection) {
	args := gjson.GetManyBytes(params, "arguments.situation", "arguments.tool_name", "arguments.task_type")
	situation, tool, taskType := strings.TrimSpace(args[0].String()), strings.TrimSpace(args[1].String()), strings.TrimSpace(args[2].String())
	if situation == "" && tool == "" {
		return Marker + " Describe the situation (argument \"situation\") to get past experience.", nil
	}
	found, err := in.search(ctx, s.Server, situation, tool, taskType)
	switch {
	case errors.Is(err, errNoSource):
		return UnavailableText, nil
	case errors.Is(err, hindsight.ErrStoreUnavailable):
		in.logger().Debug("query_hindsight: the experience store is unavailable", "server", s.Server, "err", err)
		return StoreUnavailableText, nil
	case err != nil:
		in.logger().Warn("query_hindsight: search failed", "server", s.Server, "err", err)
		return UnavailableText, nil
	case len(found) == 0:
		return NoExperienceText, nil
	}
	blocks := in.queryBlocks(found)
	header := queryHeader
	budget := defaults.Positive(in.SessionBudget, DefaultSessionBudget)
	for range 3 {
		text, ids, tokens := assemble(header, blocks, "\n\n", "", st.remaining(budget))
		if text == "" {
			break
		}
		if st.spend(tokens, budget) {
			return text, &hindsight.Injection{Channel: ChannelQuery, ExperienceIDs: ids, Tokens: tokens}
		}
	}
	return BudgetSpentText, nil
}

// usable drops experiences without a lesson, whose text fails validation
// (passes), or that are untrusted imports no local task confirmed
// (hindsight.Experience.Unconfirmed), and sorts the rest best first.
func usable(list []hindsight.ScoredExperience) []hindsight.ScoredExperience {
	out := list[:0:0]
	for _, e := range list {
		if oneLine(e.Lesson) != "" && !e.Deleted && passes(&e.Experience) && !e.Unconfirmed() {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out
}

// passes reports whether e's texts pass guard.Check as they are read,
// whatever store they came from: a lesson that fails is never told (the
// daemon quarantines it too, so this is the sidecar's own check).
func passes(e *hindsight.Experience) bool {
	return guard.CheckLesson(e.Lesson, e.Situation, e.Action, e.Result, e.ErrorTemplate, e.TaskType) == nil
}

// toolResult encodes a CallToolResult with one text item.
func toolResult(text string, isError bool) json.RawMessage {
	b, _ := json.Marshal(struct {
		Content []textItem `json:"content"`
		IsError bool       `json:"isError"`
	}{[]textItem{{"text", text}}, isError})
	return b
}

type textItem struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ToolResult appends, to a tools/call result with isError true, one text
// item with at most MaxErrorLessons lessons about that tool and that error.
// Everything else in the result, structuredContent included, is kept byte
// for byte. What it added is recorded in ex.Injected.
func (in *Injector) ToolResult(ctx context.Context, ex *proxy.Exchange, result json.RawMessage) json.RawMessage {
	if in.NoErrorResults || in.Source == nil || ex == nil || ex.Session == nil {
		return nil
	}
	// Most results are successes without the member at all: a byte search
	// is far cheaper than parsing for it.
	if !bytes.Contains(result, isErrorMember) {
		return nil
	}
	r := gjson.GetManyBytes(result, "isError", "content")
	if !r[0].Bool() || !r[1].IsArray() {
		return nil
	}
	tool := gjson.GetBytes(ex.Request, "params.name").String()
	st := in.state(ex.Session)
	budget := defaults.Positive(in.SessionBudget, DefaultSessionBudget)
	if st.remaining(budget) <= 0 {
		return nil
	}
	errText := errorText(r[1])
	found, err := in.Source.Search(ctx, hindsight.Query{
		Text:          strings.TrimSpace(tool + " " + errText),
		ErrorTemplate: errtemplate.Mask(errText),
		Namespace:     in.namespace(),
		Server:        ex.Session.Server,
		Tool:          tool,
		K:             2 * defaults.Positive(in.MaxErrorLessons, DefaultMaxErrorLessons),
		NoHit:         true,
	})
	if err != nil {
		in.logger().Debug("no lessons for error result", "server", ex.Session.Server, "tool", tool, "err", err)
		return nil
	}
	perLesson := in.lineCap()
	var blocks []block
	seen := map[string]bool{}
	for _, e := range usable(found) {
		if len(blocks) == defaults.Positive(in.MaxErrorLessons, DefaultMaxErrorLessons) {
			break
		}
		if !in.aboutError(&e, tool, errText) {
			continue
		}
		bl := lessonLine(&e, false, perLesson)
		if !seen[bl.text] {
			seen[bl.text] = true
			blocks = append(blocks, bl)
		}
	}
	if len(blocks) == 0 {
		return nil
	}
	header := fmt.Sprintf("%s Lessons from past runs about %s and this error:\n", Marker, tool)
	for range 3 {
		text, ids, tokens := assemble(header, blocks, "\n", "", st.remaining(budget))
		if text == "" {
			return nil
		}
		if !st.spend(tokens, budget) {
			continue
		}
		item, _ := json.Marshal(textItem{"text", text})
		out, err := sjson.SetRawBytes(result, "content.-1", item)
		if err != nil {
			in.logger().Error("inject error lessons", "err", err)
			return nil
		}
		ex.Injected = append(ex.Injected, hindsight.Injection{Channel: ChannelErrorResult, ExperienceIDs: ids, Tokens: tokens})
		return out
	}
	return nil
}

// isErrorMember is the key of a result's error flag, as it appears in JSON
// (a key written with escapes, "is\u0045rror", is not the flag to gjson
// either).
var isErrorMember = []byte(`"isError"`)

// errorText joins the text items of a result's content, up to 2 KB.
func errorText(content gjson.Result) string {
	var b strings.Builder
	for _, c := range content.Array() {
		if c.Get("type").String() == "text" {
			b.WriteString(c.Get("text").String())
			b.WriteByte(' ')
		}
		if b.Len() > 2048 {
			break
		}
	}
	s := b.String()
	if len(s) > 2048 {
		s = validPrefix(s[:2048])
	}
	return strings.TrimSpace(s)
}

// aboutError reports whether e may be appended to an error of tool with
// text errText: it is about that tool, above the injection gate, and about
// that error — its error template fits the text (TemplateMatch) or, for an
// experience without a template, its error code appears in the text.
// Sharing the tool is never enough. With SeenOnce, a lesson seen once
// passes below the gate when its template fits the text exactly
// (seenOnceFits).
func (in *Injector) aboutError(e *hindsight.ScoredExperience, tool, errText string) bool {
	if e.Tool != tool {
		return false
	}
	if e.Confidence < defaults.Positive(in.MinConfidence, DefaultMinConfidence) {
		return in.SeenOnce && e.Confidence >= SeenOnceConfidence && learnedHere(e.Origin) &&
			seenOnceFits(e.ErrorTemplate, errText)
	}
	if e.ErrorTemplate != "" {
		return errtemplate.Similarity(e.ErrorTemplate, errText) >= defaults.Positive(in.TemplateMatch, DefaultTemplateMatch)
	}
	return strings.TrimSpace(e.ErrorCode) != "" && sameError(e.ErrorCode, errText)
}

// learnedHere reports whether origin is reflection's (rules, llm, llm:MODEL):
// an imported pack's lessons sit at the import cap, which equals
// SeenOnceConfidence, and must not pass the gate through the seen-once path.
func learnedHere(origin string) bool {
	return origin == "rules" || origin == "llm" || strings.HasPrefix(origin, "llm:")
}

// seenOnceFits reports whether errText is an instance of tpl
// (errtemplate.Same) and tpl has SeenOnceLiterals literal words or more.
func seenOnceFits(tpl, errText string) bool {
	literals := 0
	for _, t := range errtemplate.Tokens(tpl) {
		if !strings.Contains(t, errtemplate.Wildcard) {
			literals++
		}
	}
	return literals >= SeenOnceLiterals && errtemplate.Same(tpl, errText)
}

// sameError reports whether an experience with error code code is about the
// error described by text: experiences without a code match any error;
// otherwise the code's significant part ("401" of "http_401", "ENOENT")
// must appear in the text.
func sameError(code, text string) bool {
	code = strings.TrimSpace(code)
	if code == "" {
		return true
	}
	fields := strings.FieldsFunc(code, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(fields) == 0 {
		return true
	}
	key := fields[len(fields)-1]
	return strings.Contains(strings.ToLower(text), strings.ToLower(key))
}
