package inject

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/tidwall/gjson"
)

const errResp = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"401 Unauthorized: no session, call login first"},{"type":"image","data":"AAAA","mimeType":"image/png"}],"structuredContent":{"status":401,"text":"[Hindsight] must stay out"},"isError":true,"_meta":{"trace":"t"}}}`

const fetchReq = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fetch_report","arguments":{"month":"2026-03"}}}`

func TestErrorResultLessons(t *testing.T) {
	src := &fakeSearcher{list: append(lessons(),
		exp("e6", "example", "fetch_report", "401", "Log in again when the session expired.", 0.85),
		exp("e7", "example", "fetch_report", "401", "A third 401 lesson that exceeds the cap.", 0.84))}
	h := newHarness(t, &Injector{Source: src})
	out := h.roundTrip(fetchReq, errResp)
	items := gjson.GetBytes(out, "result.content").Array()
	if len(items) != 3 {
		t.Fatalf("content has %d items: %s", len(items), out)
	}
	added := items[2]
	text := added.Get("text").String()
	if added.Get("type").String() != "text" || !strings.HasPrefix(text, Marker+" Lessons from past runs about fetch_report") {
		t.Fatalf("added item %s", added.Raw)
	}
	if lines := strings.Split(text, "\n")[1:]; len(lines) != 2 || lines[0] != "- Call login before fetch_report; it answers 401 without a session. (seen in 1 task)" {
		t.Errorf("lessons %q, want the 2 best 401 lessons", lines)
	}
	if strings.Contains(text, "500") || strings.Contains(text, "another server") {
		t.Errorf("lessons of another error or server shown: %s", text)
	}
	// Everything but the inserted item is the server's bytes.
	content := gjson.Get(errResp, "result.content")
	end := content.Index + len(content.Raw) - 1
	if !bytes.HasPrefix(out, []byte(errResp[:end])) || !bytes.HasSuffix(out, []byte(errResp[end:])) {
		t.Errorf("bytes outside the new item changed:\n%s\n%s", errResp, out)
	}
	if sc := gjson.GetBytes(out, "result.structuredContent").Raw; sc != gjson.Get(errResp, "result.structuredContent").Raw {
		t.Errorf("structuredContent changed: %s", sc)
	}
	ex := h.lastExchange()
	if len(ex.Injected) != 1 || ex.Injected[0].Channel != ChannelErrorResult || strings.Join(ex.Injected[0].ExperienceIDs, ",") != "e1,e6" ||
		ex.Injected[0].Tokens != CountTokens(text) {
		t.Errorf("injected %+v", ex.Injected)
	}
	if !bytes.Equal(ex.Response, out) {
		t.Errorf("exchange does not hold the bytes relayed")
	}
}

// TestErrorResultRelevanceGate: a lesson line is appended to an error only
// when it is about that error — its template fits the error text — and
// above the confidence gate; sharing the tool is never enough.
func TestErrorResultRelevanceGate(t *testing.T) {
	withTpl := func(id, tpl string, conf float64) hindsight.ScoredExperience {
		e := exp(id, "example", "fetch_report", "", "Lesson "+id+" about fetch_report.", 0.9)
		e.ErrorTemplate, e.Confidence = tpl, conf
		return e
	}
	tests := []struct {
		name string
		exp  hindsight.ScoredExperience
		want bool
	}{
		{"same template", withTpl("a", "<*> Unauthorized: no session, call login first", 0.8), true},
		{"template with one drifted word", withTpl("b", "<*> Unauthorized: no token, call login first", 0.8), true},
		{"another error of the same tool", withTpl("c", "<*> Not Found: no report for month <*>", 0.9), false},
		{"same words, another length", withTpl("d", "<*> Unauthorized: call login first", 0.9), false},
		{"below the gate", withTpl("e", "<*> Unauthorized: no session, call login first", 0.5), false},
		{"no template, matching code", exp("f", "example", "fetch_report", "401", "Lesson f about fetch_report.", 0.9), true},
		{"no template, no code", exp("g", "example", "fetch_report", "", "Lesson g about fetch_report.", 0.9), false},
		{"same template, another tool", func() hindsight.ScoredExperience {
			e := withTpl("h", "<*> Unauthorized: no session, call login first", 0.8)
			e.Tool = "create_invoice"
			return e
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSearcher{list: []hindsight.ScoredExperience{tt.exp}}
			h := newHarness(t, &Injector{Source: src})
			out := h.roundTrip(fetchReq, errResp)
			got := len(gjson.GetBytes(out, "result.content").Array()) == 3
			if got != tt.want {
				t.Errorf("line appended: %v, want %v: %s", got, tt.want, out)
			}
			if q := src.lastQueries(); len(q) == 0 || q[len(q)-1].ErrorTemplate != "<*> Unauthorized: no session, call login first" {
				t.Errorf("query carries template %+v", q)
			}
		})
	}
}

func TestErrorResultUntouched(t *testing.T) {
	tests := []struct{ name, resp string }{
		{"success", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"401 rows"}],"isError":false}}`},
		{"no isError", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}`},
		{"protocol error", `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"401"}}`},
		{"no content", `{"jsonrpc":"2.0","id":7,"result":{"isError":true,"structuredContent":{"a":1}}}`},
		{"no lesson for this error", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"403 Forbidden"}],"isError":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &Injector{Source: &fakeSearcher{list: lessons()[:1]}})
			if out := h.roundTrip(fetchReq, tt.resp); string(out) != tt.resp {
				t.Fatalf("changed:\n%s\n%s", tt.resp, out)
			}
		})
	}
}

func TestErrorResultDaemonDown(t *testing.T) {
	for _, src := range []*fakeSearcher{{err: errors.New("connection refused")}, {stall: true}} {
		h := newHarness(t, &Injector{Source: src})
		h.conn.HookTimeout = 50 * time.Millisecond
		if out := h.roundTrip(fetchReq, errResp); string(out) != errResp {
			t.Fatalf("changed with the daemon down:\n%s", out)
		}
	}
}

func TestSameError(t *testing.T) {
	tests := []struct {
		code, text string
		want       bool
	}{
		{"", "anything", true},
		{"401", "401 Unauthorized", true},
		{"http_401", "HTTP 401", true},
		{"ENOENT", "open x: enoent", true},
		{"429", "401 Unauthorized", false},
		{"--", "x", true},
	}
	for _, tt := range tests {
		if got := sameError(tt.code, tt.text); got != tt.want {
			t.Errorf("sameError(%q, %q) = %v", tt.code, tt.text, got)
		}
	}
}

// TestErrorResultSeenOnce: with SeenOnce, a lesson one local task learnt
// (confidence 0.5) reaches an error its template fits exactly, and only
// then; an imported lesson at the same capped confidence never does.
func TestErrorResultSeenOnce(t *testing.T) {
	const exact = "<*> Unauthorized: no session, call login first"
	once := func(id, tpl, origin string) hindsight.ScoredExperience {
		e := exp(id, "example", "fetch_report", "", "Lesson "+id+" about fetch_report.", 0.9)
		e.ErrorTemplate, e.Confidence, e.Origin = tpl, 0.5, origin
		return e
	}
	tests := []struct {
		name     string
		exp      hindsight.ScoredExperience
		seenOnce bool
		want     bool
	}{
		{"rules, exact template", once("a", exact, "rules"), true, true},
		{"llm, exact template", once("b", exact, "llm:gpt-4.1-mini"), true, true},
		{"rules, exact template, seen-once off", once("c", exact, "rules"), false, false},
		{"rules, drifted template", once("d", "<*> Unauthorized: no token, call login first", "rules"), true, false},
		{"imported pack", once("e", exact, "import:team-a"), true, false},
		{"manual", once("f", exact, "manual"), true, false},
		{"below the seen-once confidence", func() hindsight.ScoredExperience {
			e := once("g", exact, "rules")
			e.Confidence = 0.39
			return e
		}(), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &Injector{Source: &fakeSearcher{list: []hindsight.ScoredExperience{tt.exp}}, SeenOnce: tt.seenOnce})
			out := h.roundTrip(fetchReq, errResp)
			if got := len(gjson.GetBytes(out, "result.content").Array()) == 3; got != tt.want {
				t.Errorf("line appended: %v, want %v: %s", got, tt.want, out)
			}
		})
	}
}
