package traces

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// TestTaskRecJSON: a task record is encoded as json.Marshal encodes it,
// byte for byte, for every kind of string, time, list and map it holds,
// and fails where json.Marshal fails.
func TestTaskRecJSON(t *testing.T) {
	strs := []string{"", "t-20261130-151627-3f9a1c", "host:4242", "session:a/b", `q"uote`, `back\slash`,
		"<b>&amp;</b>", "<", ">", "&", "tab\there", "nul\x00", "é", "\u2028", "bad\xffutf8", "\x7f", "~"}
	times := []time.Time{{}, t0, t0.Add(123456789 * time.Nanosecond), t0.In(time.FixedZone("", -7*3600-1800))}
	unencodable := []time.Time{time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}
	rng := rand.New(rand.NewPCG(9, 10))
	str := func() string { return strs[rng.IntN(len(strs))] }
	tm := func() time.Time {
		if rng.IntN(40) == 0 {
			return unencodable[rng.IntN(len(unencodable))]
		}
		return times[rng.IntN(len(times))]
	}
	fails := 0
	for i := range 20000 {
		r := &taskRec{
			Task: hindsight.Task{ID: str(), StartedAt: tm(), EndedAt: tm(), Final: rng.IntN(2) == 0,
				StepCount: rng.IntN(1 << 20), FailureCount: rng.IntN(3) - 1, Reflection: str()},
			Group: str(), LastAt: tm(), IngestedAt: tm(),
		}
		if rng.IntN(3) == 0 {
			r.FinalAt = tm()
		}
		if n := rng.IntN(4); n > 0 {
			r.Servers = make([]string, n-1)
			for j := range r.Servers {
				r.Servers[j] = str()
			}
		}
		if n := rng.IntN(5); n > 0 {
			r.Sessions = map[string]bool{}
			for range n - 1 {
				r.Sessions[str()] = rng.IntN(2) == 0
			}
		}
		if i%100 == 0 {
			r.Steps = []hindsight.Step{{Source: str(), Seq: 1}}
		}
		want, wantErr := json.Marshal(r)
		got, err := r.appendJSON([]byte("prefix"))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("appendJSON(%+v): error %v; json.Marshal: %v", r, err, wantErr)
		}
		if err != nil {
			fails++
			continue
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("appendJSON(%+v) =\n%s\njson.Marshal:\n%s", r, got[len("prefix"):], want)
		}
	}
	if fails == 0 || fails > 5000 {
		t.Errorf("%d of 20000 records did not encode", fails)
	}
}
