package inject

import "testing"

// TestKnownCounts checks the precomputed token counts against the
// tokenizer itself.
func TestKnownCounts(t *testing.T) {
	e, err := encoder()
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range knownCounts {
		if got := len(e.EncodeOrdinary(s)); got != want {
			t.Errorf("knownCounts[%q] = %d, the tokenizer counts %d", s, want, got)
		}
	}
}
