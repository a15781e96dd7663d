package wire

import (
	"testing"
	"time"
)

// FuzzScanTime holds the scanner's reuse of a time's second (see stamp)
// to time.Time's UnmarshalJSON: after the scanner read a first time, it
// reads a second one as UnmarshalJSON does, to the same instant, zone and
// offset.
func FuzzScanTime(f *testing.F) {
	for _, seed := range [][2]string{
		{"2026-12-02T04:15:35.123456789Z", "2026-12-02T04:15:35.5Z"},
		{"2026-12-02T04:15:35Z", "2026-12-02T04:15:35.000000001Z"},
		{"2026-12-02T04:15:35.1+01:00", "2026-12-02T04:15:35.987654321+01:00"},
		{"2026-12-02T04:15:35.1+01:00", "2026-12-02T04:15:35.9-01:00"},
		{"2026-12-02T04:15:35.1Z", "2026-12-02T04:15:35.1234567891Z"},
		{"2026-12-02T04:15:35.1Z", "2026-12-02T04:15:35.Z"},
		{"2026-12-02T04:15:35.1Z", "2026-12-02T04:15:35,1Z"},
		{"2026-12-02T04:15:35.1Z", "2026-12-02T04:15:36.1Z"},
		{"2026-12-02T04:15:35Z", "2026-12-02T04:15:35"},
		{"2024-02-29T23:59:59.999Z", "2024-02-29T23:59:59.9990Z"},
		{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00.5Z"},
		{"2026-03-29T01:30:00.5+01:00", "2026-03-29T01:30:00+01:00"},
		{"2026-12-02T04:15:35.1Z", `2026-12-02T04:15:35.1\u005a`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, first, second string) {
		sc := scanner{b: []byte(`"` + first + `""` + second + `"`)}
		if _, ok := sc.time(); !ok {
			return
		}
		at := sc.i
		got, ok := sc.time()
		if sc.i != len(sc.b) {
			return // the first had a quote in it: not this test's input
		}
		var want time.Time
		err := want.UnmarshalJSON(sc.b[at:])
		if ok != (err == nil) {
			t.Fatalf("after %q, %q: scanned ok=%v, UnmarshalJSON err=%v", first, second, ok, err)
		}
		if !ok {
			return
		}
		gotName, gotOff := got.Zone()
		wantName, wantOff := want.Zone()
		if !got.Equal(want) || gotName != wantName || gotOff != wantOff || (got.Location() == time.Local) != (want.Location() == time.Local) ||
			got.Format(time.RFC3339Nano) != want.Format(time.RFC3339Nano) {
			t.Fatalf("after %q, %q: scanned %v, UnmarshalJSON %v", first, second, got, want)
		}
	})
}
