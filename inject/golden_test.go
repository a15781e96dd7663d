package inject

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/tidwall/gjson"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGoldenTexts pins what the agent reads on each channel, so a change of
// wording is a reviewed change: go test ./inject -run Golden -update.
func TestGoldenTexts(t *testing.T) {
	long := exp("long", "example", "fetch_report", "401", strings.Repeat("Refresh the session token before fetching reports. ", 60), 0.95)
	src := &fakeSearcher{list: append(lessons(), long)}
	var b strings.Builder
	section := func(name, text string) {
		b.WriteString("=== " + name + " (" + itoa(CountTokens(text)) + " tokens)\n" + text + "\n\n")
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
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != b.String() {
		t.Errorf("texts differ from %s (run with -update if intended):\n%s", path, b.String())
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
