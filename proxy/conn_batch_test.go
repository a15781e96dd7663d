package proxy

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestConnBatch: the calls of a batch are relayed as they came and each is
// recorded as an exchange of its own, in both directions; an id already in
// flight is not tracked twice.
func TestConnBatch(t *testing.T) {
	c, log, _ := connUnderTest(Hooks{})
	mustForward(t, c.FromClient([]byte(`{"jsonrpc":"2.0","id":"busy","method":"tools/list"}`)), `{"jsonrpc":"2.0","id":"busy","method":"tools/list"}`)
	batch := ` [ {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"p"}}},` +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}, 42, {"jsonrpc":"2.0","id":"busy","method":"ping"},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b"}} ] `
	a := c.FromClient([]byte(batch))
	if string(a.Forward) != batch[:len(batch)-1] || a.Reply != nil || a.Local != nil {
		t.Fatalf("batch not forwarded as it came: %+v", a)
	}
	if got := fmtIDs(a.Batch); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("batch put %v in flight, want [1 2]", got)
	}
	if c.FromServer([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)) == nil {
		t.Fatal("progress dropped")
	}
	answers := `[{"jsonrpc":"2.0","id":2,"result":{"content":[]}},{"jsonrpc":"2.0","id":"s1","method":"roots/list"},{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}]`
	if out := c.FromServer([]byte(answers)); string(out) != answers {
		t.Fatalf("server batch relayed as %s", out)
	}
	mustForward(t, c.FromClient([]byte(`[{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}]`)), `[{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}]`)
	got := map[string]*Exchange{}
	for _, ex := range log.all() {
		got[ex.Method+" "+string(ex.ID)] = ex
	}
	if len(got) != 3 {
		t.Fatalf("recorded %d exchanges, want 3: %v", len(got), got)
	}
	if ex := got["tools/call 1"]; ex == nil || string(ex.Response) != `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}` ||
		string(ex.Request) != `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"p"}}}` || ex.Notifications != 1 {
		t.Errorf("call 1: %+v", ex)
	}
	if ex := got["tools/call 2"]; ex == nil || string(ex.Response) != `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}` {
		t.Errorf("call 2: %+v", ex)
	}
	if ex := got[`roots/list "s1"`]; ex == nil || string(ex.Response) != `{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}` {
		t.Errorf("the server's roots/list: %+v", ex)
	}
	if init, initialized := c.Handshake(); init != nil || string(initialized) != `{"jsonrpc":"2.0","method":"notifications/initialized"}` {
		t.Errorf("handshake %s %s", init, initialized)
	}
	if c.Pending() != 1 { // "busy", the first one
		t.Errorf("%d requests in flight, want 1", c.Pending())
	}
}

func fmtIDs(ids []json.RawMessage) []string {
	var out []string
	for _, id := range ids {
		out = append(out, string(id))
	}
	return out
}

// FuzzConnBatch: whatever a batch holds, the Conn relays it as it came in
// either direction, and what a server batch answers leaves flight.
func FuzzConnBatch(f *testing.F) {
	f.Add(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]`, `[{"jsonrpc":"2.0","id":1,"result":{}}]`)
	f.Add(`[[],{},1,"a",null]`, `[{"jsonrpc":"2.0","id":"s","method":"roots/list"}]`)
	f.Add(`[ ]`, `[{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}, [ ] ]`)
	f.Fuzz(func(t *testing.T, in, out string) {
		c, _, _ := connUnderTest(Hooks{})
		a := c.FromClient([]byte(in))
		if m, err := Parse([]byte(in)); err == nil && m.Kind == KindBatch && string(a.Forward) != string(m.Raw) {
			t.Fatalf("batch %q forwarded as %q", in, a.Forward)
		}
		before := c.Pending()
		got := c.FromServer([]byte(out))
		if m, err := Parse([]byte(out)); err == nil && m.Kind == KindBatch && string(got) != string(m.Raw) {
			t.Fatalf("server batch %q relayed as %q", out, got)
		}
		if c.Pending() > before {
			t.Fatalf("a server message put agent requests in flight: %d → %d", before, c.Pending())
		}
	})
}

// TestConnRecordsBeforeRelay: the exchanges a batch completes, in either
// direction, and the agent's answer to a server's request go to Record
// before FromServer or FromClient returns the message to relay, and every
// one of them to Exchange after Record.
func TestConnRecordsBeforeRelay(t *testing.T) {
	var recorded []string
	var c *Conn
	var log *exchangeLog
	c, log, _ = connUnderTest(Hooks{Record: func(exs []*Exchange) {
		if n := len(log.all()); n != len(recorded) {
			t.Errorf("Exchange saw %d exchanges before Record saw the next %d", n, len(exs))
		}
		for _, ex := range exs {
			recorded = append(recorded, ex.Method+" "+string(ex.ID))
			ex.Recorded = true
		}
	}})
	c.FromClient([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b"}}]`))
	c.FromServer([]byte(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`))
	c.FromServer([]byte(`{"jsonrpc":"2.0","id":"s2","method":"roots/list"}`))
	if len(recorded) != 0 {
		t.Fatalf("Record saw %v before anything was answered", recorded)
	}
	c.FromServer([]byte(`[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":1,"result":{}}]`))
	if !slices.Equal(recorded, []string{"tools/call 2", "tools/call 1"}) {
		t.Fatalf("after the server's batch, Record saw %v", recorded)
	}
	c.FromClient([]byte(`{"jsonrpc":"2.0","id":"s1","result":{"content":{"type":"text","text":"hi"}}}`))
	c.FromClient([]byte(`[{"jsonrpc":"2.0","id":"s2","result":{"roots":[]}}]`))
	if !slices.Equal(recorded[2:], []string{`sampling/createMessage "s1"`, `roots/list "s2"`}) {
		t.Fatalf("after the agent's answers, Record saw %v", recorded)
	}
	exs := log.all()
	if len(exs) != 4 {
		t.Fatalf("Exchange saw %d exchanges, want 4", len(exs))
	}
	for _, ex := range exs {
		if !ex.Recorded {
			t.Errorf("%s %s reached Exchange unrecorded", ex.Method, ex.ID)
		}
	}
}
