// Package exampleserver is the MCP server that `hindsight demo` wraps: a
// small billing API with the traps real APIs have. An agent that does not
// know them stumbles; one that learned them does not.
//
//   - fetch_report and create_invoice need a session: without a prior login
//     they answer 401.
//   - create_invoice rejects a due date that is not YYYY-MM-DD with 400.
//   - send_invoice is rate limited: it answers 429 with a retry-after unless
//     the caller passes pause_ms (the server then waits that long first) or
//     retries after the advertised delay.
//
// The server is deterministic: the same calls give the same answers, in
// milliseconds. Each connection (mcp-go client session) has its own state
// (login, invoices, rate limit). It is built on mcp-go; its tests talk to
// it with the official go-sdk client.
package exampleserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Name is the server's name in its serverInfo.
const Name = "hindsight-example-billing"

// DefaultRetryAfter is how long send_invoice asks a caller to wait.
const DefaultRetryAfter = 300 * time.Millisecond

// Instructions is what the server tells clients about itself. It does not
// mention the traps: that is what the agent has to learn.
const Instructions = "Billing API of Example Corp. Use fetch_report to read a month's billable usage, " +
	"create_invoice to bill a customer and send_invoice to deliver an invoice."

// Options configure a server. The zero value is the demo's server.
type Options struct {
	// RetryAfter is the delay send_invoice asks for; 0 means DefaultRetryAfter.
	RetryAfter time.Duration
	// Instructions replaces the server's instructions when not empty.
	Instructions string
}

// Usage is one customer's billable amount in a month.
type Usage struct {
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// usage is the billable usage the server knows, by month.
var usage = map[string][]Usage{
	"2026-02": {{"Acme GmbH", 1250.00, "EUR"}, {"Globex Ltd", 310.40, "EUR"}},
	"2026-03": {{"Acme GmbH", 1420.50, "EUR"}, {"Globex Ltd", 298.00, "EUR"}, {"Initech SA", 87.25, "EUR"}},
	"2026-04": {{"Acme GmbH", 1388.00, "EUR"}},
}

// conn is the state of one client connection.
type conn struct {
	retryAfter time.Duration

	mu        sync.Mutex
	user      string
	invoices  map[string]invoice
	next      int
	limitedAt time.Time // when send_invoice last answered 429
}

type invoice struct {
	ID       string  `json:"invoice_id"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	DueDate  string  `json:"due_date"`
	Sent     bool    `json:"sent"`
}

// New returns a server whose every connection starts logged out.
func New(opt Options) *server.MCPServer {
	instr := Instructions
	if opt.Instructions != "" {
		instr = opt.Instructions
	}
	s := server.NewMCPServer(Name, "1.0.0", server.WithTitle("Example billing API"),
		server.WithInstructions(instr), server.WithToolCapabilities(false))
	retry := opt.RetryAfter
	if retry <= 0 {
		retry = DefaultRetryAfter
	}
	var mu sync.Mutex
	conns := map[string]*conn{}
	state := func(ctx context.Context) *conn {
		id := ""
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			id = cs.SessionID()
		}
		mu.Lock()
		defer mu.Unlock()
		c := conns[id]
		if c == nil {
			c = &conn{retryAfter: retry, invoices: map[string]invoice{}}
			conns[id] = c
		}
		return c
	}
	add := func(t mcp.Tool, h func(c *conn, ctx context.Context, args map[string]any) *mcp.CallToolResult) {
		s.AddTool(t, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args := map[string]any{}
			switch a := req.Params.Arguments.(type) {
			case nil:
			case map[string]any:
				args = a
			default:
				return failure(400, "Bad Request: arguments must be a JSON object", nil), nil
			}
			return h(state(ctx), ctx, args), nil
		})
	}
	add(mcp.Tool{
		Name:           "login",
		Description:    "Open a session for this connection.",
		RawInputSchema: schema(`"user":{"type":"string","description":"user name"},"password":{"type":"string","description":"password"}`, "user", "password"),
	}, (*conn).login)
	add(mcp.Tool{
		Name:           "fetch_report",
		Description:    "Billable usage of every customer in a month.",
		RawInputSchema: schema(`"month":{"type":"string","description":"the month, e.g. 2026-03"}`, "month"),
		Annotations:    mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true)},
	}, (*conn).fetchReport)
	add(mcp.Tool{
		Name:           "create_invoice",
		Description:    "Create an invoice for a customer.",
		RawInputSchema: schema(`"customer":{"type":"string"},"amount":{"type":"number"},"due_date":{"type":"string","description":"when the invoice is due"}`, "customer", "amount", "due_date"),
	}, (*conn).createInvoice)
	add(mcp.Tool{
		Name:           "send_invoice",
		Description:    "Send an invoice to its customer by e-mail.",
		RawInputSchema: schema(`"invoice_id":{"type":"string"},"pause_ms":{"type":"integer","description":"milliseconds to wait before sending"}`, "invoice_id"),
	}, (*conn).sendInvoice)
	return s
}

// schema builds an object input schema from JSON properties.
func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
}

// failure is an isError result whose text starts with the HTTP-like status,
// as many API wrappers report errors.
func failure(status int, msg string, structured any) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{mcp.NewTextContent(fmt.Sprintf("%d %s", status, msg))},
		StructuredContent: structured,
	}
}

// success is a result with a text and, when structured is not nil, the same
// data as structuredContent.
func success(text string, structured any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, StructuredContent: structured}
}

func str(args map[string]any, key string) string {
	s, _ := args[key].(string)
	return strings.TrimSpace(s)
}

func missing(args map[string]any, keys ...string) *mcp.CallToolResult {
	for _, k := range keys {
		if _, ok := args[k]; !ok {
			return failure(400, fmt.Sprintf("Bad Request: missing argument %q", k), nil)
		}
	}
	return nil
}

func (c *conn) login(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	if r := missing(args, "user", "password"); r != nil {
		return r
	}
	user := str(args, "user")
	if user == "" || str(args, "password") == "" {
		return failure(400, "Bad Request: user and password must not be empty", nil)
	}
	c.mu.Lock()
	c.user = user
	c.mu.Unlock()
	return success(fmt.Sprintf("Logged in as %s. The session lasts until the connection closes.", user),
		map[string]any{"user": user, "session": "active"})
}

func (c *conn) loggedIn() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.user != ""
}

const unauthorized = "Unauthorized: no active session. Call login first."

var monthRE = regexp.MustCompile(`^\d{4}-\d{2}$`)

func (c *conn) fetchReport(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	if !c.loggedIn() {
		return failure(401, unauthorized, map[string]any{"status": 401, "error": "unauthorized"})
	}
	if r := missing(args, "month"); r != nil {
		return r
	}
	month := str(args, "month")
	if !monthRE.MatchString(month) {
		return failure(400, fmt.Sprintf("Bad Request: invalid month %q: expected YYYY-MM", month), nil)
	}
	rows := usage[month]
	if rows == nil {
		rows = []Usage{}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Billable usage for %s (%d customers):", month, len(rows))
	for _, u := range rows {
		fmt.Fprintf(&b, "\n- %s: %.2f %s", u.Customer, u.Amount, u.Currency)
	}
	return success(b.String(), map[string]any{"month": month, "usage": rows})
}

var dateRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

func (c *conn) createInvoice(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	if !c.loggedIn() {
		return failure(401, unauthorized, map[string]any{"status": 401, "error": "unauthorized"})
	}
	if r := missing(args, "customer", "amount", "due_date"); r != nil {
		return r
	}
	due := str(args, "due_date")
	if _, err := time.Parse(time.DateOnly, due); err != nil || !dateRE.MatchString(due) {
		return failure(400, fmt.Sprintf("Bad Request: invalid due_date %q: expected YYYY-MM-DD", due),
			map[string]any{"status": 400, "field": "due_date", "expected": "YYYY-MM-DD"})
	}
	amount, ok := args["amount"].(float64)
	if !ok || amount <= 0 {
		return failure(400, "Bad Request: amount must be a positive number", nil)
	}
	c.mu.Lock()
	c.next++
	inv := invoice{ID: fmt.Sprintf("INV-%04d", c.next), Customer: str(args, "customer"), Amount: amount, DueDate: due}
	c.invoices[inv.ID] = inv
	c.mu.Unlock()
	return success(fmt.Sprintf("Created invoice %s for %s: %.2f, due %s.", inv.ID, inv.Customer, inv.Amount, inv.DueDate), inv)
}

func (c *conn) sendInvoice(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	if r := missing(args, "invoice_id"); r != nil {
		return r
	}
	id := str(args, "invoice_id")
	pause, _ := args["pause_ms"].(float64)
	wait := time.Duration(pause) * time.Millisecond
	if wait > 10*time.Second {
		return failure(400, "Bad Request: pause_ms must be at most 10000", nil)
	}
	c.mu.Lock()
	inv, ok := c.invoices[id]
	// The limit lets a call through when the caller paused long enough, or
	// when it retries after the advertised delay.
	allowed := wait >= c.retryAfter || (!c.limitedAt.IsZero() && time.Since(c.limitedAt) >= c.retryAfter)
	if ok && !allowed {
		c.limitedAt = time.Now()
	}
	c.mu.Unlock()
	if !ok {
		return failure(404, fmt.Sprintf("Not Found: no invoice %q", id), nil)
	}
	ms := c.retryAfter.Milliseconds()
	if !allowed {
		return failure(429, fmt.Sprintf("Too Many Requests: send_invoice is rate limited. Retry after %d ms, or pass pause_ms=%d to wait server-side.", ms, ms),
			map[string]any{"status": 429, "retry_after_ms": ms})
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return failure(499, "Client Closed Request: cancelled while pausing", nil)
		}
	}
	c.mu.Lock()
	inv.Sent = true
	c.invoices[id] = inv
	c.limitedAt = time.Time{}
	c.mu.Unlock()
	return success(fmt.Sprintf("Sent invoice %s to %s.", id, inv.Customer), inv)
}

// Months lists the months the server has usage for, for tests and help.
func Months() []string {
	out := make([]string, 0, len(usage))
	for m := range usage {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Serve runs the demo's server over r and w (newline-delimited JSON-RPC,
// as on stdio) until the client closes its end or ctx ends.
func Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	return ServeWith(ctx, Options{}, r, w)
}

// ServeWith is Serve with options.
func ServeWith(ctx context.Context, opt Options, r io.Reader, w io.Writer) error {
	ss := server.NewStdioServer(New(opt))
	ss.SetErrorLogger(log.New(io.Discard, "", 0))
	err := ss.Listen(ctx, r, w)
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("serve example server: %w", err)
	}
	return nil
}
