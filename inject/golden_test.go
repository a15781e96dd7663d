package inject

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/tidwall/gjson"
)

// TestGoldenTexts pins what the agent reads on each channel, so a change of
// wording is a reviewed change: go test ./inject -run Golden -update.
func TestGoldenTexts(t *testing.T) {
	long := exp("long", "example", "fetch_report", "401", strings.Repeat("Refresh the session token before fetching reports. ", 60), 0.95)
	src := &fakeSearcher{list: append(lessons(), long)}
	var b strings.Builder
	section := func(name, text string) {
		b.WriteString("=== " + name + " (" + strconv.Itoa(CountTokens(text)) + " tokens)\n" + text + "\n\n")
	}
	h := newHarness(t, &Injector{Source: src})
	instr := gjson.GetBytes(h.roundTrip(initReq, initResp(`,"instructions":"Billing API."`)), "result.instructions").String()
	section("instructions", instr)
	h = newHarness(t, &Injector{Source: src})
	section("query_hindsight fetch_report", answerText(t, h.local(callReq(1, "About to fetch the March report", "fetch_report"))))
	h = newHarness(t, &Injector{Source: src})
	section("query_hindsight unknown tool", answerText(t, h.local(callReq(2, "About to archive invoices", "archive"))))
	h = newHarness(t, &Injector{Source: src})
	section("error result fetch_report 401", gjson.GetBytes(h.roundTrip(fetchReq, errResp), "result.content.2.text").String())
	h = newHarness(t, &Injector{Source: src, SessionBudget: 150})
	section("budget of 150: instructions", gjson.GetBytes(h.roundTrip(initReq, initResp(`,"instructions":"x"`)), "result.instructions").String())
	section("budget of 150: then query_hindsight", answerText(t, h.local(callReq(3, "About to fetch", "fetch_report"))))
	h = newHarness(t, &Injector{Source: &fakeSearcher{err: errors.New("dial unix hindsight.sock: connect: no such file")}})
	section("query_hindsight, no daemon", answerText(t, h.local(callReq(4, "About to fetch", "fetch_report"))))
	h = newHarness(t, &Injector{Source: &fakeSearcher{err: fmt.Errorf("daemon: %w (status 503)", hindsight.ErrStoreUnavailable)}})
	section("query_hindsight, store unavailable", answerText(t, h.local(callReq(5, "About to fetch", "fetch_report"))))
	path := filepath.Join("testdata", "channels.golden")
	testkit.Golden(t, path, b.String())
}
