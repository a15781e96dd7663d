package reflect

import "math"

// Confidence is what an experience's evidence says about its lesson: the
// lower bound of the Wilson score interval (z = 1) of the lesson's success
// rate, with support tasks where the fix worked and counter tasks where the
// lesson held (it was shown, or its precondition was met) and the same error
// happened anyway. An unambiguous lesson — one the error text itself
// grounds: a value shape it names, an argument it asks for, a tool it says
// to call first — counts one extra supporting observation.
//
// So a lesson seen once scores 0.5, below the injection gate
// (DefaultInjectConfidence), unless it is unambiguous (0.67); seen in two
// tasks 0.67, three 0.75, five 0.83; one counter-example among three
// observations brings it back to 0.39. Helpful and harmful counters in the
// manner of ExpeL's and ACE's, read as a binomial.
func Confidence(support, counter int, unambiguous bool) float64 {
	s := float64(max(support, 0))
	if unambiguous {
		s++
	}
	n := s + float64(max(counter, 0))
	if n == 0 {
		return 0
	}
	const z = 1.0
	p := s / n
	lb := (p + z*z/(2*n) - z*math.Sqrt(p*(1-p)/n+z*z/(4*n*n))) / (1 + z*z/n)
	return math.Round(max(lb, 0)*1000) / 1000
}

// DefaultInjectConfidence is the confidence an experience needs to be
// injected into an agent's instructions or appended to an error result
// without being asked for: two supporting tasks, or one unambiguous one.
const DefaultInjectConfidence = 0.6

// unambiguousPrior is the confidence of a single unambiguous observation.
var unambiguousPrior = Confidence(1, 0, true)

// singlePrior is the confidence of a single ordinary observation.
var singlePrior = Confidence(1, 0, false)

// hadBonus reports whether a stored experience's confidence shows it was
// unambiguous: above what its counts alone give.
func hadBonus(conf float64, support, counter int) bool {
	return conf > Confidence(support, counter, false)+1e-9
}
