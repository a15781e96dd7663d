// Package demo is `hindsight demo`: a scripted agent runs the same billing
// task twice against the bundled example server, through the Hindsight
// sidecar, over real stdio. The first run stumbles on the server's traps and
// recovers by reading the errors; Hindsight learns from it; the second run
// reads the lessons Hindsight injects and asks query_hindsight before each
// risky call, and gets through without a failure.
//
// The agent is scripted, not clever: it knows the task's plan and parses
// advice from any text it is shown (see Parse). It never knows in advance
// which calls will fail; what it does differently in the second run comes
// only from what Hindsight told it.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// Step is one tool call the agent made.
type Step struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments,omitempty"`
	IsError   bool           `json:"is_error"`
	Result    string         `json:"result"`              // the server's first text, on one line
	Why       string         `json:"why,omitempty"`       // what made the agent do it
	Hindsight string         `json:"hindsight,omitempty"` // text Hindsight added to the result
	Tokens    int            `json:"tokens_injected"`
	Learned   []string       `json:"learned,omitempty"` // lessons the agent took from this step
}

// Transcript is what one run of the agent did.
type Transcript struct {
	Steps          []Step        `json:"steps"`
	Failures       int           `json:"failures"`
	TokensInjected int           `json:"tokens_injected"`
	Instructions   string        `json:"instructions_injected,omitempty"` // what Hindsight appended to the server's instructions
	Lessons        []string      `json:"lessons_used,omitempty"`
	Duration       time.Duration `json:"-"`
	Done           bool          `json:"done"` // the task was completed
}

// Agent is the scripted agent, an mcp-go client. It bills one customer for
// one month and sends the invoice.
type Agent struct {
	// Client is connected and initialized (see Initialize); Instructions
	// are what its initialize result said.
	Client       *client.Client
	Instructions string
	Month        string    // the month to bill, e.g. "2026-03"
	Due          time.Time // the invoice's due date
	User         string
	Password     string
	// DateLayout is how the agent writes dates unless told otherwise
	// (a US habit: 01/02/2006).
	DateLayout string
	// OnStep, when set, is called after each step, for live output.
	OnStep func(Step)
	// OnInstructions, when set, is called with the text Hindsight added to
	// the server's instructions, if any.
	OnInstructions func(text string)

	queryTool string            // the name of Hindsight's tool, if listed
	advice    map[string]Advice // what the agent knows, by tool
	done      map[string]bool   // prerequisite tools already called
	t         *Transcript
}

// maxAttempts bounds the calls of one planned step.
const maxAttempts = 4

// Run performs the task once and returns what happened. It fails only when
// the session breaks or the task cannot be finished.
func (a *Agent) Run(ctx context.Context) (*Transcript, error) {
	start := time.Now()
	a.t = &Transcript{}
	a.advice, a.done = map[string]Advice{}, map[string]bool{}
	if a.DateLayout == "" {
		a.DateLayout = "01/02/2006"
	}
	if err := a.readServer(ctx); err != nil {
		return a.t, err
	}
	defer func() { a.t.Duration = time.Since(start) }()

	report, err := a.call(ctx, "fetch_report", map[string]any{"month": a.Month},
		fmt.Sprintf("read the billable usage for %s", a.Month))
	if err != nil {
		return a.t, err
	}
	customer, amount, err := firstCustomer(report)
	if err != nil {
		return a.t, err
	}
	inv, err := a.call(ctx, "create_invoice", map[string]any{"customer": customer, "amount": amount, "due_date": a.Due},
		fmt.Sprintf("bill %s %.2f", customer, amount))
	if err != nil {
		return a.t, err
	}
	var created struct {
		ID string `json:"invoice_id"`
	}
	if err := json.Unmarshal(inv, &created); err != nil || created.ID == "" {
		return a.t, fmt.Errorf("read invoice id: %s", inv)
	}
	if _, err := a.call(ctx, "send_invoice", map[string]any{"invoice_id": created.ID}, "send "+created.ID); err != nil {
		return a.t, err
	}
	a.t.Done = true
	return a.t, nil
}

// readServer reads the server's instructions and tool list, taking in any
// lessons Hindsight appended and noting its query tool.
func (a *Agent) readServer(ctx context.Context) error {
	if i := strings.Index(a.Instructions, inject.Marker); i >= 0 {
		injected := a.Instructions[i:]
		a.t.Instructions = injected
		a.t.TokensInjected += inject.CountTokens(injected)
		a.learn("", injected)
		if a.OnInstructions != nil {
			a.OnInstructions(injected)
		}
	}
	res, err := a.Client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return fmt.Errorf("list tools: %w", err)
	}
	for _, t := range res.Tools {
		if strings.HasPrefix(t.Name, inject.QueryToolName) && strings.Contains(t.Description, "Hindsight") {
			a.queryTool = t.Name
		}
	}
	return nil
}

// learn takes in the lessons of text Hindsight injected and returns those
// it understood; tool is the tool the text is about, when known.
func (a *Agent) learn(tool, text string) []string {
	var used []string
	for _, l := range Lessons(tool, text) {
		adv := Parse(l.Tool, l.Text)
		if adv.Tool == "" || adv.empty() {
			continue
		}
		known := a.advice[adv.Tool]
		known.merge(adv)
		a.advice[adv.Tool] = known
		used = append(used, l.Text)
		if !contains(a.t.Lessons, l.Text) {
			a.t.Lessons = append(a.t.Lessons, l.Text)
		}
	}
	return used
}

// call makes one planned call of tool: it asks Hindsight first when it can,
// applies what it knows, and on an error applies the advice in the error
// (and in any lessons attached to it) and tries again.
func (a *Agent) call(ctx context.Context, tool string, args map[string]any, why string) (json.RawMessage, error) {
	if a.queryTool != "" {
		if err := a.ask(ctx, tool, why); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		if err := a.prepare(ctx, tool); err != nil {
			return nil, err
		}
		callArgs, reason := a.apply(tool, args)
		if reason == "" {
			reason = why
		}
		res, err := a.callTool(ctx, tool, callArgs)
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", tool, err)
		}
		text, hs := split(res)
		step := Step{Tool: tool, Arguments: callArgs, IsError: res.IsError, Result: firstLine(text), Why: reason, Hindsight: hs}
		if hs != "" {
			step.Tokens = inject.CountTokens(hs)
			step.Learned = a.learn(tool, hs)
		}
		a.record(step)
		if !res.IsError {
			out, _ := json.Marshal(res.StructuredContent)
			return out, nil
		}
		if attempt == maxAttempts {
			return nil, fmt.Errorf("%s still fails after %d attempts: %s", tool, attempt, firstLine(text))
		}
		// Recover: the error's own words, then what Hindsight attached.
		adv := Parse(tool, text)
		known := a.advice[tool]
		known.merge(adv)
		a.advice[tool] = known
		if adv.Wait > 0 && len(adv.Values) == 0 {
			select {
			case <-time.After(adv.Wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
}

// ask calls Hindsight's query tool about tool and learns from the answer.
func (a *Agent) ask(ctx context.Context, tool, why string) error {
	args := map[string]any{"situation": fmt.Sprintf("About to call %s to %s.", tool, why), "tool_name": tool}
	res, err := a.callTool(ctx, a.queryTool, args)
	if err != nil {
		return fmt.Errorf("call %s: %w", a.queryTool, err)
	}
	server, text := split(res)
	if text == "" {
		text = server
	}
	step := Step{Tool: a.queryTool, Arguments: args, IsError: res.IsError, Result: firstLine(text), Why: "ask Hindsight before " + tool}
	if strings.HasPrefix(text, inject.Marker) {
		step.Tokens = inject.CountTokens(text)
		step.Hindsight = text
		step.Learned = a.learn(tool, text)
	}
	a.record(step)
	return nil
}

// prepare makes the calls tool needs first, as far as the agent knows.
func (a *Agent) prepare(ctx context.Context, tool string) error {
	for _, pre := range a.advice[tool].Before {
		if a.done[pre] {
			continue
		}
		if pre != "login" {
			continue // the agent only knows how to call login
		}
		args := map[string]any{"user": a.User, "password": a.Password}
		res, err := a.callTool(ctx, pre, args)
		if err != nil {
			return fmt.Errorf("call %s: %w", pre, err)
		}
		text, hs := split(res)
		a.record(Step{Tool: pre, Arguments: map[string]any{"user": a.User, "password": "…"}, IsError: res.IsError,
			Result: firstLine(text), Why: fmt.Sprintf("%s needs %s first", tool, pre), Hindsight: hs})
		if !res.IsError {
			a.done[pre] = true
		}
	}
	return nil
}

// apply returns args changed as the agent's advice about tool says, and why.
func (a *Agent) apply(tool string, args map[string]any) (map[string]any, string) {
	adv := a.advice[tool]
	out := make(map[string]any, len(args))
	var why []string
	for k, v := range args {
		if d, ok := v.(time.Time); ok {
			layout := a.DateLayout
			if l, ok := adv.Formats[k]; ok {
				layout = l
				why = append(why, fmt.Sprintf("%s as %s", k, strings.NewReplacer("2006", "YYYY", "01", "MM", "02", "DD").Replace(l)))
			}
			out[k] = d.Format(layout)
			continue
		}
		out[k] = v
	}
	keys := make([]string, 0, len(adv.Values))
	for k := range adv.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, isDate := adv.Formats[k]; isDate {
			continue
		}
		out[k] = adv.Values[k]
		why = append(why, fmt.Sprintf("%s=%v", k, adv.Values[k]))
	}
	if len(why) == 0 {
		return out, ""
	}
	return out, "applying advice: " + strings.Join(why, ", ")
}

func (a *Agent) callTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	return a.Client.CallTool(ctx, req)
}

// Initialize starts c's session (protocol 2025-11-25, the era the demo's
// sidecar and server speak) and returns the server's instructions.
func Initialize(ctx context.Context, c *client.Client) (string, error) {
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "hindsight-demo-agent", Version: "1.0.0"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	return res.Instructions, nil
}

func (a *Agent) record(s Step) {
	a.t.Steps = append(a.t.Steps, s)
	if s.IsError {
		a.t.Failures++
	}
	a.t.TokensInjected += s.Tokens
	if a.OnStep != nil {
		a.OnStep(s)
	}
}

// split returns the text a tool result's content items carry, apart from
// the items Hindsight added.
func split(res *mcp.CallToolResult) (server, hindsight string) {
	var s, h []string
	for _, c := range res.Content {
		t, ok := mcp.AsTextContent(c)
		if !ok {
			continue
		}
		if strings.HasPrefix(t.Text, inject.Marker) {
			h = append(h, t.Text)
		} else {
			s = append(s, t.Text)
		}
	}
	return strings.Join(s, "\n"), strings.Join(h, "\n")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// firstCustomer reads the first customer and amount of a fetch_report
// result.
func firstCustomer(report json.RawMessage) (string, float64, error) {
	var r struct {
		Usage []struct {
			Customer string  `json:"customer"`
			Amount   float64 `json:"amount"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(report, &r); err != nil || len(r.Usage) == 0 {
		return "", 0, fmt.Errorf("read report: no usage in %s", report)
	}
	return r.Usage[0].Customer, r.Usage[0].Amount, nil
}
