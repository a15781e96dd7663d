package corpus

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
)

// A task is built in two passes: the workflows append calls (run), then
// finish inserts the think calls, the tools/list steps, timestamps, step
// indices, error codes and causal tags, and derives the labels.
type task struct {
	g        *gen
	id       string
	start    time.Time
	client   client
	hostPID  int
	calls    []*call
	episodes []*episode
	generics []*generic
}

// call is one tools/call as a workflow stages it.
type call struct {
	server, tool string
	args         map[string]any
	text         string              // the result's text content, or the error's
	isErr        bool                // an isError result
	rpc          *hindsight.RPCError // a JSON-RPC error instead of a result
	latency      time.Duration
	thought      string // when set, a think call with this thought comes right before
	index        int    // step index, set by finish
}

func (c *call) failed() bool { return c.isErr || c.rpc != nil }

// episode is a staged error: its failed calls and the call that recovered
// from them (nil when the agent gave up).
type episode struct {
	class string
	fails []*call
	fixed *call
}

// generic is an episode of a class that attaches to the next ordinary call
// (do) of one of its tools.
type generic struct {
	class, server string
	tools         []string
	done          bool
}

type client struct{ name, version, protocol string }

var clients = []client{
	{"claude-desktop", "0.14.3", "2025-06-18"},
	{"cursor", "1.4.2", "2025-06-18"},
	{"Visual Studio Code", "1.104.1", "2025-06-18"},
	{"claude-code", "2.0.8", "2025-06-18"},
	{"goose", "1.7.0", "2025-03-26"},
}

func (g *gen) newTask(start time.Time) *task {
	return &task{
		g:       g,
		id:      g.fresh(func() string { return "t-" + start.Format("20060102-150405") + "-" + g.hex(6) }),
		start:   start,
		client:  clients[g.r.IntN(len(clients))],
		hostPID: g.between(1200, 64000),
	}
}

// run stages the task's workflows: those its episodes need, and for a task
// with one workflow (or none) sometimes another one.
func (t *task) run(p plan) {
	specs := map[string]bool{}
	servers := map[string]bool{}
	for _, e := range p.episodes {
		specs[e.class] = true
		servers[e.server] = true
		if c := classOf(e.class); c.generic {
			t.generics = append(t.generics, &generic{class: e.class, server: e.server, tools: genericTools(e, p.episodes)})
		}
	}
	var flows []func()
	if servers["shop"] {
		flows = append(flows, t.shopFlows(specs)...)
	}
	if servers["calendar"] {
		flows = append(flows, func() { t.calendarFlow(specs) })
	}
	if servers["repo"] {
		if specs[ClassRepoArchived] {
			flows = append(flows, t.archivedRepoFlow)
		} else {
			flows = append(flows, func() { t.repoFlow(specs) })
		}
	}
	if servers["files"] {
		flows = append(flows, func() { t.filesFlow(specs) })
	}
	if len(flows) == 0 || (len(flows) == 1 && t.g.chance(0.45)) {
		var others []string
		for _, s := range []string{"shop", "calendar", "repo", "files"} {
			if !servers[s] {
				others = append(others, s)
			}
		}
		n := 1
		if len(flows) == 0 && t.g.chance(0.5) {
			n = 2
		}
		t.g.r.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
		for _, s := range others[:n] {
			switch s {
			case "shop":
				flows = append(flows, t.shopFlows(nil)...)
			case "calendar":
				flows = append(flows, func() { t.calendarFlow(nil) })
			case "repo":
				flows = append(flows, func() { t.repoFlow(nil) })
			case "files":
				flows = append(flows, func() { t.filesFlow(nil) })
			}
		}
	}
	t.g.r.Shuffle(len(flows), func(i, j int) { flows[i], flows[j] = flows[j], flows[i] })
	for _, f := range flows {
		f()
	}
	for _, ge := range t.generics {
		if !ge.done {
			panic(fmt.Sprintf("corpus: task %s: %s on %s found no call of %v", t.id, ge.class, ge.server, ge.tools))
		}
	}
}

// genericTools returns the tools a generic episode may attach to: calls
// every workflow of its server makes through do, minus those another
// episode of the task stages itself.
func genericTools(e epSpec, all []epSpec) []string {
	switch {
	case e.server == "shop":
		return []string{"get_customer"}
	case e.server == "calendar":
		return []string{"invite"}
	case slices.ContainsFunc(all, func(o epSpec) bool { return o.class == ClassRateLimited }):
		return []string{"get_file"}
	case e.class == ClassTokenExpired && !slices.ContainsFunc(all, func(o epSpec) bool { return o.class == ClassRepoArchived }):
		return []string{"get_file", "search_code", "run_ci"}
	default:
		return []string{"search_code", "get_file"}
	}
}

// ok appends a successful call; result is the text content as is (a
// string) or marshalled to JSON.
func (t *task) ok(server, tool string, args map[string]any, result any) *call {
	c := &call{server: server, tool: tool, args: args, text: resultText(result), latency: t.latency(tool, false)}
	t.calls = append(t.calls, c)
	return c
}

// do appends an ordinary successful call, unless a pending generic episode
// attaches to it: then it stages that episode's failure and recovery,
// ending with this call's success.
func (t *task) do(server, tool string, args map[string]any, result any) *call {
	for _, ge := range t.generics {
		if ge.done || ge.server != server || !slices.Contains(ge.tools, tool) {
			continue
		}
		ge.done = true
		return t.stageGeneric(ge, server, tool, args, result)
	}
	return t.ok(server, tool, args, result)
}

func (t *task) stageGeneric(ge *generic, server, tool string, args map[string]any, result any) *call {
	g := t.g
	switch ge.class {
	case ClassUpstreamTimeout:
		secs := g.pick([]string{"10", "15", "20", "30", "45", "60"})
		f := t.fail(server, tool, args, "upstream timed out after "+secs+"s")
		f.latency = time.Duration(mustAtoi(secs))*time.Second + time.Duration(g.between(2, 90))*time.Millisecond
		fails := []*call{f}
		if g.chance(0.35) { // the same call, timing out again
			f2 := t.fail(server, tool, args, "upstream timed out after "+secs+"s")
			f2.latency = f.latency + time.Duration(g.between(1, 40))*time.Millisecond
			fails = append(fails, f2)
		}
		s := t.ok(server, tool, args, result)
		if g.chance(0.5) {
			s.thought = g.pick([]string{"Probably a blip upstream; try the exact same call again.", "The backend was slow, not wrong. Same request once more.", "Timeouts are usually transient. Retrying unchanged."})
		}
		t.episode(ge.class, s, fails...)
		return s
	case ClassUnavailable:
		f := t.fail(server, tool, args, "503 Service Unavailable: calendar backend is restarting, try again shortly")
		f.latency = time.Duration(g.between(30, 140)) * time.Millisecond
		s := t.ok(server, tool, args, result)
		if g.chance(0.5) {
			s.thought = "The calendar service said it is restarting. Wait a moment and send the same request."
		}
		t.episode(ge.class, s, f)
		return s
	case ClassTokenExpired:
		at := t.start.Add(-time.Duration(g.between(60, 50000)) * time.Second).Format(time.RFC3339)
		f := t.fail(server, tool, args, "401 Unauthorized: token expired at "+at+"; call auth_refresh")
		f.latency = time.Duration(g.between(40, 120)) * time.Millisecond
		exp := t.start.Add(time.Duration(g.between(3600, 7200)) * time.Second).Format(time.RFC3339)
		t.ok(server, "auth_refresh", map[string]any{}, map[string]any{"refreshed": true, "expires_at": exp})
		s := t.ok(server, tool, args, result)
		t.episode(ge.class, s, f)
		return s
	}
	panic("corpus: not a generic class: " + ge.class)
}

// fail appends a call whose result is an isError CallToolResult with text.
func (t *task) fail(server, tool string, args map[string]any, text string) *call {
	c := &call{server: server, tool: tool, args: args, text: text, isErr: true, latency: t.latency(tool, true)}
	t.calls = append(t.calls, c)
	return c
}

// rpcFail appends a call answered with a JSON-RPC error.
func (t *task) rpcFail(server, tool string, args map[string]any, code int, message string) *call {
	c := &call{server: server, tool: tool, args: args, rpc: &hindsight.RPCError{Code: code, Message: message}, latency: t.latency(tool, true)}
	t.calls = append(t.calls, c)
	return c
}

// episode records an error episode: the failed calls and the call that
// recovered from them, nil if none did.
func (t *task) episode(class string, fixed *call, fails ...*call) {
	t.episodes = append(t.episodes, &episode{class: class, fails: fails, fixed: fixed})
}

// latency draws a call's duration: validation errors are fast, writes
// slower than reads, think instant.
func (t *task) latency(tool string, failed bool) time.Duration {
	lo, hi := 60, 420
	switch {
	case tool == "think":
		lo, hi = 1, 4
	case failed:
		lo, hi = 8, 90
	case slices.Contains(writeTools, tool):
		lo, hi = 180, 1400
	}
	return time.Duration(t.g.between(lo*1000, hi*1000)) * time.Microsecond
}

var writeTools = []string{"refund_payment", "create_return", "update_address", "send_email", "create_event", "invite", "create_branch", "commit_file", "open_pull_request", "run_ci", "write_file", "auth_refresh"}

// finish turns the staged calls into steps: it inserts think calls (the
// forced ones, and others at random while the task stays within maxCalls),
// a tools/list step per server at the start, timestamps, step indices,
// error codes and causal tags (as the capture does), and returns the steps
// and the labels of the failed calls. seq is the last seq handed out.
func (t *task) finish(tagger *capture.Tagger, seq *uint64) ([]hindsight.Step, []Label) {
	g := t.g
	think := make([]bool, len(t.calls))
	n := len(t.calls)
	for i, c := range t.calls {
		if c.thought != "" {
			think[i] = true
			n++
		}
	}
	if n > maxCalls {
		panic(fmt.Sprintf("corpus: task %s has %d calls", t.id, n))
	}
	for i := range t.calls {
		if !think[i] && n < maxCalls && g.chance(0.3) {
			think[i] = true
			n++
		}
	}
	for i := 0; n < minCalls; i++ {
		if !think[i] {
			think[i] = true
			n++
		}
	}
	var calls []*call
	for i, c := range t.calls {
		if think[i] {
			thought := c.thought
			if thought == "" {
				thought = thoughtFor(g, c)
			}
			calls = append(calls, &call{server: c.server, tool: "think", args: map[string]any{"thought": thought}, text: thinkResult[c.server], latency: t.latency("think", false)})
		}
		calls = append(calls, c)
	}

	sessions := map[string]string{}
	var servers []string
	for _, c := range calls {
		if _, ok := sessions[c.server]; !ok {
			sessions[c.server] = g.fresh(func() string {
				return g.hex(8) + "-" + g.hex(4) + "-4" + g.hex(3) + "-a" + g.hex(3) + "-" + g.hex(12)
			})
			servers = append(servers, c.server)
		}
	}
	var steps []hindsight.Step
	now := t.start
	add := func(s hindsight.Step, gap, lat time.Duration) {
		now = now.Add(gap)
		lat = lat.Truncate(time.Microsecond)
		*seq++
		s.TaskID, s.SessionID, s.StepIndex = t.id, sessions[s.Server], len(steps)
		s.StartedAt, s.EndedAt, s.LatencyMS = now, now.Add(lat), float64(lat.Microseconds())/1000
		s.Direction, s.Source, s.Seq = hindsight.ClientToServer, Source, *seq
		s.ClientName, s.ClientVersion, s.ProtocolVersion = t.client.name, t.client.version, t.client.protocol
		s.Transport, s.HostPID = "stdio", t.hostPID
		s.ErrorCode = capture.ErrorCode(&s)
		s.CausalTag = hindsight.TagSuccess
		switch {
		case timeoutCodes[s.ErrorCode]:
			s.CausalTag = hindsight.TagTimeout
		case s.IsError || s.Error != nil:
			s.CausalTag = hindsight.TagFailure
		}
		tagger.Tag(&s)
		steps = append(steps, s)
		now = now.Add(lat)
	}
	for _, srv := range servers {
		add(hindsight.Step{Server: srv, Method: "tools/list", Result: toolsList(srv)},
			time.Duration(g.between(20, 400))*time.Millisecond, time.Duration(g.between(2000, 30000))*time.Microsecond)
	}
	prevFailed := false
	for _, c := range calls {
		gap := time.Duration(g.between(800, 7000)) * time.Millisecond
		switch {
		case prevFailed:
			gap = time.Duration(g.between(2000, 11000)) * time.Millisecond
		case len(steps) > 0 && steps[len(steps)-1].Tool == "think":
			gap = time.Duration(g.between(150, 1200)) * time.Millisecond
		}
		args, err := json.Marshal(c.args)
		if err != nil {
			panic(err)
		}
		s := hindsight.Step{Server: c.server, Method: "tools/call", Tool: c.tool, Arguments: args}
		switch {
		case c.rpc != nil:
			s.Error = c.rpc
		default:
			s.Result = callResult(c.text, c.isErr)
			s.IsError = c.isErr
		}
		c.index = len(steps)
		add(s, gap, c.latency)
		prevFailed = c.failed()
	}

	var labels []Label
	labelled := map[*call]bool{}
	for _, e := range t.episodes {
		cl := classOf(e.class)
		at := -1
		if e.fixed != nil {
			at = e.fixed.index
		}
		for _, f := range e.fails {
			labelled[f] = true
			labels = append(labels, Label{TaskID: t.id, StepIndex: f.index, Server: f.server, Tool: f.tool,
				ErrorClass: e.class, Recovery: cl.recovery, RecoveredAt: at})
		}
	}
	for _, c := range t.calls {
		if c.failed() && !labelled[c] {
			panic(fmt.Sprintf("corpus: task %s: failed %s call in no episode", t.id, c.tool))
		}
	}
	slices.SortFunc(labels, func(a, b Label) int { return a.StepIndex - b.StepIndex })
	return steps, labels
}

// timeoutCodes are the error codes that make the capture tag a failed
// step "timeout" rather than "failure".
var timeoutCodes = map[string]bool{"timeout": true, "errno-ETIMEDOUT": true, "http-408": true, "http-504": true}

// thinkResult is what each server's think tool returns: the servers differ.
var thinkResult = map[string]string{"shop": "ok", "calendar": "", "repo": "ok", "files": ""}

// callResult is a CallToolResult with one text content (none when text is
// empty), marked isError when isErr.
func callResult(text string, isErr bool) json.RawMessage {
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type result struct {
		Content []content `json:"content"`
		IsError bool      `json:"isError,omitempty"`
	}
	r := result{Content: []content{}, IsError: isErr}
	if text != "" {
		r.Content = append(r.Content, content{"text", text})
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return b
}

// resultText renders a tool's result: a string as is, anything else as
// compact JSON (what most MCP servers put in their text content).
func resultText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// thoughtFor writes the thought of a think call made before c for no
// particular reason: what the agent is about to do.
func thoughtFor(g *gen, c *call) string {
	tpls := thoughts[c.tool]
	if len(tpls) == 0 {
		tpls = []string{"Next step: " + strings.ReplaceAll(c.tool, "_", " ") + "."}
	}
	var kv []string
	for _, k := range sortedKeys(c.args) {
		kv = append(kv, "{"+k+"}", fmt.Sprint(c.args[k]))
	}
	th := strings.NewReplacer(kv...).Replace(g.pick(tpls))
	if strings.Contains(th, "{") { // an argument this call lacks
		th = "Next step: " + strings.ReplaceAll(c.tool, "_", " ") + "."
	}
	return th
}

// thoughts are templates of unprompted thoughts before a call of a tool;
// {arg} is replaced with the call's argument.
var thoughts = map[string][]string{
	"get_customer":      {"Start by pulling up the customer record for {email}.", "Who is {email}? Look them up."},
	"find_orders":       {"List the orders of {customer_id} to see what they bought.", "I need the customer's order history."},
	"get_order":         {"Check the details of {order_id} before touching it.", "Open order {order_id}."},
	"refund_payment":    {"The customer is owed {amount}; issue the refund on {order_id}.", "Refund time for {order_id}."},
	"create_return":     {"Set up the return for {order_id}.", "Create the RMA so the customer gets a label."},
	"update_address":    {"Update the shipping address on file for {customer_id}.", "Change the address as requested."},
	"send_email":        {"Let the customer know by e-mail.", "Write to {to} to confirm what I did."},
	"list_events":       {"See what is already on the calendar.", "Check {calendar_id} for conflicts first."},
	"find_free_slot":    {"Find a time that works for everyone on {date}.", "Look for a free slot."},
	"create_event":      {"Put the meeting on the calendar: {title}.", "Create the event now."},
	"invite":            {"Send the invitations for {event_id}.", "Invite the attendees."},
	"cancel_event":      {"Cancel {event_id} as asked.", "Remove the old event."},
	"search_code":       {"Search {repo} for {query}.", "Where does {query} live in the code?"},
	"get_file":          {"Read {path} to understand the current code.", "Open {path} on {ref}."},
	"create_branch":     {"Make a branch {name} for the change.", "I need a working branch."},
	"commit_file":       {"Commit the fix to {branch}.", "Push the edited {path}."},
	"open_pull_request": {"Open a PR from {head} into {base}.", "Time for a pull request."},
	"run_ci":            {"Kick off CI on {ref}.", "Run the {workflow} workflow."},
	"get_ci_status":     {"Is the CI run finished yet?", "Check on CI run {run_id}."},
	"list_directory":    {"What is in {path}?", "List the directory before reading anything."},
	"read_file":         {"Read {path}.", "Load the data from {path}."},
	"write_file":        {"Write the summary to {path}.", "Save the result."},
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func mustAtoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

// toolsList returns the ListToolsResult of a server.
func toolsList(server string) []byte {
	src := map[string]string{"shop": shopTools, "calendar": calendarTools, "repo": repoTools, "files": filesTools}[server]
	if src == "" {
		panic("corpus: no tools for server " + server)
	}
	var b strings.Builder
	b.WriteString(`{"tools":`)
	b.WriteString(src)
	b.WriteString(`}`)
	return compact(b.String())
}
