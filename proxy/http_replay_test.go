package proxy

import (
	"strconv"
	"testing"
	"time"
)

// TestEventLogBounds checks that a stream's log keeps at most its number of
// events, none older than its age, and resumes after an event it holds.
func TestEventLogBounds(t *testing.T) {
	l := newEventLog("hs1", false, 3, time.Hour)
	for i := 1; i <= 5; i++ {
		if n := l.append([]byte(strconv.Itoa(i))); n != uint64(i) {
			t.Fatalf("event %d numbered %d", i, n)
		}
	}
	evs, done, _ := l.since(1)
	if len(evs) != 3 || evs[0].n != 3 || string(evs[2].data) != "5" || done {
		t.Fatalf("since 1: %+v (done %v); want events 3 to 5", evs, done)
	}
	if evs, _, _ := l.since(5); len(evs) != 1 || evs[0].n != 5 {
		t.Fatalf("since 5: %+v", evs)
	}
	l.mu.Lock()
	l.events[0].at = time.Now().Add(-2 * time.Hour) // event 3 grew old
	l.mu.Unlock()
	if evs, _, _ := l.since(0); len(evs) != 2 || evs[0].n != 4 {
		t.Fatalf("after event 3 aged out: %+v", evs)
	}
	l.finish()
	if _, done, _ := l.since(6); !done {
		t.Error("finished log not done")
	}
	if l.stale(time.Now()) || !l.stale(time.Now().Add(2*time.Hour)) {
		t.Error("stale: want false now, true past its age")
	}
}

// FuzzParseEventID checks that the ids the sidecar gives parse back, and
// that no Last-Event-ID makes the parser panic.
func FuzzParseEventID(f *testing.F) {
	f.Add("hs1", uint64(0), "hs1_7")
	f.Add("a_b", uint64(18446744073709551615), "_")
	f.Fuzz(func(t *testing.T, stream string, n uint64, raw string) {
		parseEventID(raw)
		if stream == "" {
			return
		}
		l := newEventLog(stream, false, 1, time.Minute)
		s, m, ok := parseEventID(l.eventID(n))
		if !ok || s != stream || m != n {
			t.Fatalf("%q parsed as %q, %d, %v", l.eventID(n), s, m, ok)
		}
	})
}
