//go:build race

package bpe

// raceEnabled: the race detector slows both encoders tenfold; the
// differential test then checks a sample of its corpus (the fuzz targets
// and a run without -race cover the rest).
const raceEnabled = true
