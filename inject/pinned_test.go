package inject

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestInitializePinnedLesson: a pinned lesson reaches the instructions
// beside the top three, though its confidence is under the gate and it
// ranks last; the lessons are asked for with the pinned ones.
func TestInitializePinnedLesson(t *testing.T) {
	list := lessons()
	for i := range list {
		if list[i].ID == "e5" {
			list[i].Pinned = true
		}
	}
	src := &fakeSearcher{list: list}
	h := newHarness(t, &Injector{Source: src})
	out := h.roundTrip(initReq, initResp(`,"instructions":"Billing."`))
	instr := gjson.GetBytes(out, "result.instructions").String()
	for _, want := range []string{"Retry fetch_report once on 500", "Call login before fetch_report", "Pass due_date", "pause_ms=300"} {
		if !strings.Contains(instr, want) {
			t.Errorf("instructions lack %q:\n%s", want, instr)
		}
	}
	if inj := h.injected(); len(inj) != 1 || len(inj[0].ExperienceIDs) != 4 {
		t.Errorf("injected %+v, want the top three and the pinned one", inj)
	}
	if q := src.lastQueries(); len(q) == 0 || !q[0].IncludePinned {
		t.Errorf("lessons not asked with the pinned ones: %+v", q)
	}
}
