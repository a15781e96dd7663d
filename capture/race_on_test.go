//go:build race

package capture

// raceEnabled: the race detector slows redaction several times, so timing
// figures measured under it are not the product's.
const raceEnabled = true
