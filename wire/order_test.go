package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// members splits the JSON object raw into its members ("key":value).
func members(t testing.TB, raw []byte) [][]byte {
	t.Helper()
	sc := scanner{b: raw}
	sc.ws()
	if !sc.byte('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var out [][]byte
	for sc.ws(); !sc.byte('}'); sc.ws() {
		start := sc.i
		if _, _, ok := sc.str(); !ok {
			t.Fatalf("no key at %d of %s", sc.i, raw)
		}
		sc.ws()
		if !sc.byte(':') {
			t.Fatalf("no colon at %d of %s", sc.i, raw)
		}
		sc.ws()
		if !sc.skip(1) {
			t.Fatalf("bad value at %d of %s", sc.i, raw)
		}
		out = append(out, raw[start:sc.i])
		sc.ws()
		sc.byte(',')
	}
	return out
}

// FuzzKeyOrder: the scanner and DecodeStep read a step's keys in any
// order, as encoding/json does; the encoder's order only makes them
// faster. Each step's members are shuffled and the result must read as
// the step does.
func FuzzKeyOrder(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(7), uint64(0))
	steps := append(richSteps(), compactStep("ob-k", 1, 0))
	encoded := make([][]byte, len(steps))
	for i := range steps {
		enc := AppendStep
		if i == len(steps)-1 {
			enc = AppendCompactStep
		}
		b, err := enc(nil, &steps[i])
		if err != nil {
			f.Fatal(err)
		}
		encoded[i] = b
	}
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		rng := rand.New(rand.NewPCG(s1, s2))
		batch := []byte(`{"steps":[`)
		for i, raw := range encoded {
			m := members(t, raw)
			rng.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
			shuffled := append(append([]byte{'{'}, bytes.Join(m, []byte{','})...), '}')
			want, ok := scanStep(raw)
			got, gotOK := scanStep(shuffled)
			if !ok || !gotOK || !want.StartedAt.Equal(got.StartedAt) || !want.EndedAt.Equal(got.EndedAt) || want.Source != got.Source ||
				want.Seq != got.Seq || want.Failed != got.Failed || want.SessionID != got.SessionID || want.Server != got.Server ||
				want.ExplicitTask != got.ExplicitTask || want.Transport != got.Transport || want.HostPID != got.HostPID {
				t.Fatalf("scan of %s: %+v, %v; in the encoder's order %+v, %v", shuffled, got, gotOK, want, ok)
			}
			var a, b hindsight.Step
			if err := DecodeStep(raw, &a); err != nil {
				t.Fatal(err)
			}
			if err := DecodeStep(shuffled, &b); err != nil {
				t.Fatalf("DecodeStep(%s): %v", shuffled, err)
			}
			ea, _ := AppendStep(nil, &a)
			eb, _ := AppendStep(nil, &b)
			if !bytes.Equal(ea, eb) {
				t.Fatalf("DecodeStep(%s) = %s; in the encoder's order %s", shuffled, eb, ea)
			}
			checkDecode(t, shuffled)
			if i > 0 {
				batch = append(batch, ',')
			}
			batch = append(batch, shuffled...)
		}
		if !checkScan(t, append(batch, "]}"...)) {
			t.Fatalf("the fast path refused a batch in another key order: %s", batch)
		}
	})
}

// FuzzDecodeStep holds DecodeStep to encoding/json (UnmarshalCompact) on
// any input: the same error or none, the same step.
func FuzzDecodeStep(f *testing.F) {
	for _, s := range richSteps() {
		b, err := AppendStep(nil, &s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	c := compactStep("ob-d", 1, 0)
	b, err := AppendCompactStep(nil, &c)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"source":"a","SEQ":1,"tool":"\u00e9","derived":["result"],"response":{"result":null}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDecode(t, raw)
	})
}
