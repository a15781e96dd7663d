package reflect

import "testing"

// TestConfidence pins the Wilson lower bounds the rest of the package and
// its documentation quote.
func TestConfidence(t *testing.T) {
	cases := []struct {
		name             string
		support, counter int
		unambiguous      bool
		want             float64
	}{
		{"nothing", 0, 0, false, 0},
		{"negative counts", -3, -1, false, 0},
		{"counter only", 0, 1, false, 0},
		{"one task", 1, 0, false, 0.5},
		{"one unambiguous task", 1, 0, true, 0.667},
		{"two tasks", 2, 0, false, 0.667},
		{"three tasks", 3, 0, false, 0.75},
		{"two unambiguous tasks", 2, 0, true, 0.75},
		{"five tasks", 5, 0, false, 0.833},
		{"two tasks, one counter", 2, 1, false, 0.386},
		{"one task, one counter", 1, 1, false, 0.211},
		{"one unambiguous task, one counter", 1, 1, true, 0.386},
		{"unambiguous alone", 0, 0, true, 0.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Confidence(c.support, c.counter, c.unambiguous); got != c.want {
				t.Errorf("Confidence(%d, %d, %v) = %v, want %v", c.support, c.counter, c.unambiguous, got, c.want)
			}
		})
	}
	// The priors the reflectors and the validator hand out, and the gate
	// they are measured against: one ordinary observation stays below it,
	// one unambiguous one or two ordinary ones pass it.
	if singlePrior != 0.5 || unambiguousPrior != 0.667 {
		t.Errorf("priors %v and %v, want 0.5 and 0.667", singlePrior, unambiguousPrior)
	}
	if singlePrior >= DefaultInjectConfidence || unambiguousPrior < DefaultInjectConfidence || Confidence(2, 0, false) < DefaultInjectConfidence {
		t.Errorf("gate %v does not separate one observation (%v) from one unambiguous (%v) or two (%v)",
			DefaultInjectConfidence, singlePrior, unambiguousPrior, Confidence(2, 0, false))
	}
}

// TestConfidenceMonotonic: more support never lowers the confidence, more
// counter-evidence never raises it, and the bonus never hurts.
func TestConfidenceMonotonic(t *testing.T) {
	for _, u := range []bool{false, true} {
		for c := 0; c <= 10; c++ {
			for s := 0; s <= 30; s++ {
				here := Confidence(s, c, u)
				if here < 0 || here > 1 {
					t.Fatalf("Confidence(%d, %d, %v) = %v out of [0, 1]", s, c, u, here)
				}
				if next := Confidence(s+1, c, u); next < here {
					t.Errorf("Confidence(%d, %d, %v) = %v < Confidence(%d, %d, %v) = %v: not monotonic in support", s+1, c, u, next, s, c, u, here)
				}
				if next := Confidence(s, c+1, u); next > here {
					t.Errorf("Confidence(%d, %d, %v) = %v > Confidence(%d, %d, %v) = %v: not antitone in counter", s, c+1, u, next, s, c, u, here)
				}
				if s > 0 && c == 0 {
					if next := Confidence(s+1, 0, u); next <= here {
						t.Errorf("Confidence(%d, 0, %v) = %v does not rise above %v", s+1, u, next, here)
					}
				}
				if !u && Confidence(s, c, true) < here {
					t.Errorf("the unambiguous bonus lowers Confidence(%d, %d)", s, c)
				}
			}
		}
	}
}

// TestHadBonus: a stored confidence tells whether its lesson was
// unambiguous, at any count of support and counter-evidence.
func TestHadBonus(t *testing.T) {
	cases := []struct {
		name             string
		conf             float64
		support, counter int
		want             bool
	}{
		{"single prior", singlePrior, 1, 0, false},
		{"unambiguous prior", unambiguousPrior, 1, 0, true},
		{"two tasks", Confidence(2, 0, false), 2, 0, false},
		{"two tasks, unambiguous", Confidence(2, 0, true), 2, 0, true},
		{"countered", Confidence(2, 1, false), 2, 1, false},
		{"countered, unambiguous", Confidence(2, 1, true), 2, 1, true},
		{"lower than the counts give", 0.3, 3, 0, false},
		// Two tasks score what one unambiguous task does: the counts tell
		// them apart.
		{"0.667 with two tasks", 0.667, 2, 0, false},
		{"0.667 with one task", 0.667, 1, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := hadBonus(c.conf, c.support, c.counter); got != c.want {
				t.Errorf("hadBonus(%v, %d, %d) = %v, want %v", c.conf, c.support, c.counter, got, c.want)
			}
		})
	}
	for s := 1; s <= 8; s++ {
		for c := 0; c <= 4; c++ {
			if !hadBonus(Confidence(s, c, true), s, c) || hadBonus(Confidence(s, c, false), s, c) {
				t.Errorf("hadBonus does not recover the bonus of Confidence(%d, %d, ·)", s, c)
			}
		}
	}
}
