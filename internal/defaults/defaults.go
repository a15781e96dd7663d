// Package defaults fills unset settings: the zero or negative value of a
// tunable means "use the default" throughout Hindsight's options structs.
package defaults

import "time"

// Positive returns v, or def when v is not positive.
func Positive[T int | int64 | float64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
