package capture

import (
	"encoding/json"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// TestTagSeenCallAllocs: tagging a call the session saw before allocates
// nothing, and the tags stay those of the rules (a repeated success is a
// retry, a success after a failure a recovery).
func TestTagSeenCallAllocs(t *testing.T) {
	tg := NewTagger()
	mk := func(tool string, tag hindsight.CausalTag) hindsight.Step {
		return hindsight.Step{SessionID: "s", Direction: hindsight.ClientToServer, Method: "tools/call", Tool: tool,
			Arguments: json.RawMessage(`{"a": 1}`), CausalTag: tag}
	}
	for _, c := range []struct {
		tool     string
		tag, out hindsight.CausalTag
	}{
		{"a", hindsight.TagSuccess, hindsight.TagSuccess},
		{"a", hindsight.TagSuccess, hindsight.TagRetry},
		{"b", hindsight.TagFailure, hindsight.TagFailure},
		{"a", hindsight.TagSuccess, hindsight.TagSuccess},
		{"b", hindsight.TagSuccess, hindsight.TagRecovery},
	} {
		s := mk(c.tool, c.tag)
		if tg.Tag(&s); s.CausalTag != c.out {
			t.Errorf("%s %s: tagged %s, want %s", c.tool, c.tag, s.CausalTag, c.out)
		}
	}
	steps := []hindsight.Step{mk("a", hindsight.TagSuccess), mk("b", hindsight.TagFailure)}
	if n := testing.AllocsPerRun(100, func() {
		for i := range steps {
			tg.Tag(&steps[i])
		}
	}); n != 0 {
		t.Errorf("tagging calls seen before: %v allocations, want 0", n)
	}
}
