package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// batchJSON encodes steps as a step batch, whole.
func batchJSON(t testing.TB, steps []hindsight.Step) []byte {
	t.Helper()
	return tasktest.BatchJSON(t, steps, AppendStep)
}

// compactBatchJSON encodes steps as a sidecar's outbox delivers them: in
// their compact encoding.
func compactBatchJSON(t testing.TB, steps []hindsight.Step) []byte {
	t.Helper()
	return tasktest.BatchJSON(t, steps, AppendCompactStep)
}

// checkScan checks the fast path against encoding/json on data: when it
// takes data, encoding/json decodes it to the same steps.
func checkScan(t *testing.T, data []byte) (taken bool) {
	t.Helper()
	fast, ok := scanBatch(data)
	b, err := referenceBatch(data)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("fast path took %q, which encoding/json refuses: %v", data, err)
	}
	if len(fast) != len(b.Steps) {
		t.Fatalf("fast path read %d steps, encoding/json %d", len(fast), len(b.Steps))
	}
	for i := range fast {
		want := MetaOf(&b.Steps[i])
		got := fast[i].Meta
		if !got.StartedAt.Equal(want.StartedAt) || !got.EndedAt.Equal(want.EndedAt) ||
			got.StartedAt.String() != want.StartedAt.String() || got.EndedAt.String() != want.EndedAt.String() {
			t.Fatalf("step %d: times %v, %v; want %v, %v", i, got.StartedAt, got.EndedAt, want.StartedAt, want.EndedAt)
		}
		got.StartedAt, got.EndedAt, want.StartedAt, want.EndedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if got != want {
			t.Fatalf("step %d: read %+v; want %+v", i, got, want)
		}
		var s hindsight.Step
		if err := UnmarshalCompact(fast[i].JSON, &s); err != nil {
			t.Fatalf("step %d: stored JSON %q does not decode: %v", i, fast[i].JSON, err)
		}
		if !reflect.DeepEqual(s, b.Steps[i]) {
			t.Fatalf("step %d: stored JSON decodes to %+v; want %+v", i, s, b.Steps[i])
		}
		checkDecode(t, fast[i].JSON)
	}
	return true
}

// referenceBatch decodes a step batch as encoding/json does, compact steps
// included (hindsight.UnmarshalCompact): what the scanner must agree
// with.
func referenceBatch(data []byte) (stepBatch, error) {
	var raw struct {
		Steps []json.RawMessage `json:"steps"`
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&raw); err != nil {
		return stepBatch{}, err
	}
	b := stepBatch{Steps: make([]hindsight.Step, len(raw.Steps))}
	for i, r := range raw.Steps {
		if err := UnmarshalCompact(r, &b.Steps[i]); err != nil {
			return stepBatch{}, err
		}
	}
	if raw.Steps == nil {
		b.Steps = nil
	}
	return b, nil
}

// checkDecode checks DecodeStep against encoding/json (with compact steps'
// bodies derived) on raw.
func checkDecode(t *testing.T, raw []byte) {
	t.Helper()
	var want, got hindsight.Step
	wantErr := UnmarshalCompact(raw, &want)
	gotErr := DecodeStep(raw, &got)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("DecodeStep(%q): %v; json.Unmarshal: %v", raw, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if !got.StartedAt.Equal(want.StartedAt) || !got.EndedAt.Equal(want.EndedAt) ||
		got.StartedAt.String() != want.StartedAt.String() || got.EndedAt.String() != want.EndedAt.String() {
		t.Fatalf("DecodeStep(%q): times %v, %v; want %v, %v", raw, got.StartedAt, got.EndedAt, want.StartedAt, want.EndedAt)
	}
	got.StartedAt, got.EndedAt, want.StartedAt, want.EndedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeStep(%q) = %+v; want %+v", raw, got, want)
	}
}

func TestScanstepBatch(t *testing.T) {
	canonical := batchJSON(t, richSteps())
	for _, tc := range []struct {
		name string
		body string
		fast bool // the fast path takes it
		ok   bool // DecodeBatch takes it
	}{
		{"canonical", string(canonical), true, true},
		{"no steps", `{"steps":[]}`, true, true},
		{"null steps", `{"steps":null}`, true, true},
		{"whitespace", " \n{ \"steps\" :\t[ {\"source\" : \"a\" , \"seq\":1 } ] }\r\n", true, true},
		{"nulls", `{"steps":[{"source":"a","seq":1,"arguments":null,"error":null,"task_id":null,"is_error":null,"started_at":null,"latency_ms":null}]}`, true, true},
		{"escapes in fields not read", `{"steps":[{"source":"a","seq":1,"method":"tools\/call","tool":"\u00e9\ud83d\ude00","error_code":"\ud800"}]}`, true, true},
		{"key in another case", `{"steps":[{"Source":"a","seq":1}]}`, false, true},
		{"escaped key", `{"steps":[{"sour\u0063e":"a","seq":1}]}`, false, true},
		{"escaped source", `{"steps":[{"source":"\u0061","seq":1}]}`, false, true},
		{"escaped body", `{"steps":[{"source":"a","seq":1,"result":"\u0061\n"}]}`, true, true},
		{"repeated key", `{"steps":[{"source":"a","source":"b","seq":1}]}`, false, true},
		{"unknown key", `{"steps":[{"source":"a","seq":1,"extra":{"x":[1]}}]}`, false, true},
		{"other top-level key", `{"v":1,"steps":[{"source":"a","seq":1}]}`, false, true},
		{"trailing data", `{"steps":[{"source":"a","seq":1}]} {"x"`, false, true},
		{"invalid UTF-8 source", "{\"steps\":[{\"source\":\"a\xff\",\"seq\":1}]}", false, true},
		{"negative seq", `{"steps":[{"source":"a","seq":-1}]}`, false, false},
		{"fractional index", `{"steps":[{"source":"a","seq":1,"step_index":1.5}]}`, false, false},
		{"string latency", `{"steps":[{"source":"a","seq":1,"latency_ms":"1"}]}`, false, false},
		{"bad time", `{"steps":[{"source":"a","seq":1,"started_at":"yesterday"}]}`, false, false},
		{"bad error", `{"steps":[{"source":"a","seq":1,"error":[1]}]}`, false, false},
		{"leading zero", `{"steps":[{"source":"a","seq":01}]}`, false, false},
		{"bad escape", `{"steps":[{"source":"a","seq":1,"result":"\x"}]}`, false, false},
		{"control character", "{\"steps\":[{\"source\":\"a\",\"seq\":1,\"result\":\"\t\"}]}", false, false},
		{"unterminated", `{"steps":[{"source":"a","seq":1,"result":{"a":[1,2}}]}`, false, false},
		{"not a step", `{"steps":[1]}`, false, false},
		{"empty", ``, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkScan(t, []byte(tc.body)); got != tc.fast {
				t.Errorf("fast path took it: %v; want %v", got, tc.fast)
			}
			steps, err := DecodeBatch([]byte(tc.body))
			if (err == nil) != tc.ok {
				t.Fatalf("DecodeBatch: %v; want ok %v", err, tc.ok)
			}
			for _, s := range steps {
				var d hindsight.Step
				if err := json.Unmarshal(s.JSON, &d); err != nil {
					t.Fatalf("stored JSON %q does not decode: %v", s.JSON, err)
				}
			}
		})
	}
}

// FuzzScanstepBatch checks the one-pass batch reader against
// encoding/json: whatever it takes, encoding/json decodes to the same
// steps, and what it stores decodes to them too.
func FuzzScanstepBatch(f *testing.F) {
	f.Add(batchJSON(f, richSteps()))
	f.Add([]byte(`{"steps":[{"source":"a","seq":1,"error":{},"injected":null,"is_error":null,"host_pid":-3}]}`))
	f.Add([]byte(`{"steps":[{"source":"a","seq":18446744073709551615,"started_at":"0001-01-01T00:00:00Z","ended_at":"9999-12-31T23:59:59.999999999+14:00"}]}`))
	f.Add([]byte(`{"steps":[{"source":"a","seq":1,"latency_ms":-0.0e+00,"result":[[[{"":{}}]]],"causal_tag":"timeout"}]}`))
	f.Add(compactBatchJSON(f, []hindsight.Step{compactStep("c", 1, 0)}))
	f.Add([]byte(`{"steps":[{"source":"a","seq":1,"method":"x","request":{"params":[1]},"derived":["arguments"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScan(t, data)
	})
}

// TestScanstepBatchMutations runs checkScan on seeded random mutations of
// valid batches: bytes changed, dropped, doubled, and JSON's special
// characters put in, so the fast path meets near-valid input of every
// kind on every run (FuzzScanstepBatch explores further).
func TestScanstepBatchMutations(t *testing.T) {
	seeds := [][]byte{
		batchJSON(t, richSteps()),
		compactBatchJSON(t, []hindsight.Step{compactStep("ob-m", 1, 0), compactStep("ob-m", 2, time.Second)}),
		[]byte(`{"steps":[{"source":"a","seq":1,"error":{},"injected":null,"is_error":true,"host_pid":-3,"latency_ms":1.5e3}]}`),
	}
	special := []byte(`{}[]",:\ -+.eE0119tfnul` + "\x00\n\xff")
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	taken := 0
	for range n {
		b := bytes.Clone(seeds[rng.IntN(len(seeds))])
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(b))
			switch rng.IntN(4) {
			case 0:
				b[i] = special[rng.IntN(len(special))]
			case 1:
				b = append(b[:i], b[i+1:]...)
			case 2:
				b = append(b[:i+1], b[i:]...)
			default:
				b = append(b[:i], append([]byte{special[rng.IntN(len(special))]}, b[i:]...)...)
			}
		}
		if checkScan(t, b) {
			taken++
		}
		// The same mutation in one step alone, as stored.
		if i := bytes.Index(b, []byte(`[{`)); i >= 0 {
			checkDecode(t, b[i+1:len(b)-2])
		}
	}
	if taken == 0 {
		t.Fatal("the fast path took none of the mutations")
	}
	t.Logf("the fast path took %d of %d mutations", taken, n)
}

// TestScanStrings holds the string scanner to encoding/json on strings
// made of long plain runs (which it skips with plainRun), escapes, quotes,
// control characters and multi-byte UTF-8 in every order: it takes what
// encoding/json takes, ends where the string ends, and says whether it
// has escapes.
func TestScanStrings(t *testing.T) {
	pieces := []string{
		"a", "abcdefgh", strings.Repeat("x", 15), strings.Repeat("y", 17), strings.Repeat("z", 40),
		`"`, `\`, `\"`, `\\`, `\n`, `\u00e9`, `\u12`, `\x`, "\x00", "\x1f", "\t", "\x7f", "é", "\xff", " ",
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if rng.IntN(8) > 0 {
			b.WriteByte('"')
		}
		in := b.String()
		// The first string in, as encoding/json reads it.
		var want string
		wantOK, wantEnd := false, 0
		d := json.NewDecoder(strings.NewReader(in + " 0"))
		if err := d.Decode(&want); err == nil {
			wantOK, wantEnd = true, int(d.InputOffset())
		}
		sc := scanner{b: []byte(in + " 0")}
		got, plain, ok := sc.str()
		if ok != wantOK {
			t.Fatalf("str(%q): ok %v; encoding/json: %v", in, ok, wantOK)
		}
		if !ok {
			continue
		}
		if sc.i != wantEnd {
			t.Fatalf("str(%q) ends at %d; encoding/json at %d", in, sc.i, wantEnd)
		}
		if hasEscape := bytes.IndexByte(got, '\\') >= 0; plain == hasEscape {
			t.Fatalf("str(%q): plain %v with %q between the quotes", in, plain, got)
		}
		if plain && utf8.Valid(got) && string(got) != want {
			t.Fatalf("str(%q) = %q; encoding/json: %q", in, got, want)
		}
	}
}

// TestStepKeys: the keys key tries first are the Step's keys in the order
// of their constants, which is the order AppendStep writes them in,
// and key reads a key it does not expect as str and stepKey do.
func TestStepKeys(t *testing.T) {
	for f, k := range stepKeys {
		if got := stepKey(k[1 : len(k)-1]); got != f {
			t.Errorf("stepKey(%s) = %d; want %d", k, got, f)
		}
	}
	first := richSteps()[0]
	raw, err := AppendStep(nil, &first)
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	sc := scanner{b: raw, i: 1}
	for {
		k, _, ok := sc.str()
		if !ok {
			t.Fatalf("no key at %d of %s", sc.i, raw)
		}
		order = append(order, stepKey(string(k)))
		if sc.i++; !sc.skip(1) || sc.peek() == '}' {
			break
		}
		sc.i++
	}
	if !slices.IsSorted(order) || len(order) < 25 {
		t.Errorf("AppendStep writes the keys in the order %v", order)
	}
	for _, c := range []struct {
		in   string
		next int
		want int
		ok   bool
	}{
		{`"task_id":`, kTaskID, kTaskID, true},
		{`"session_id":`, kTaskID, kSessionID, true},
		{`"task_idx":`, kTaskID, 0, false},
		{`"task_id`, kTaskID, 0, false},
		{`"task\u005fid":`, kTaskID, 0, false},
		{`"seq":`, kSeq, kSeq, true},
		{`"seq":`, kSeq + 1, kSeq, true},
	} {
		sc := scanner{b: []byte(c.in)}
		if f, ok := sc.key(c.next); ok != c.ok || ok && (f != c.want || sc.b[sc.i] != ':') {
			t.Errorf("key(%q, %d) = %d, %v at %d; want %d, %v", c.in, c.next, f, ok, sc.i, c.want, c.ok)
		}
	}
}

func TestControl(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100000 {
		b := make([]byte, rng.IntN(40))
		want := -1
		for i := range b {
			b[i] = byte(0x20 + rng.IntN(0xe0))
			if rng.IntN(50) == 0 {
				b[i] = byte(rng.IntN(0x20))
			}
			if want < 0 && b[i] < 0x20 {
				want = i
			}
		}
		if got := control(b); got != want {
			t.Fatalf("control(%q) = %d; want %d", b, got, want)
		}
	}
}

func TestSpecial8(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pick := []byte{0, 1, 0x1f, 0x20, 0x21, '"', '\\', '[', 0x7f, 0x80, 0xa2, 0xdc, 0xff, 'a'}
	for range 200000 {
		var b [8]byte
		want := 8 // the first special byte
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = pick[rng.IntN(len(pick))]
			} else {
				b[i] = byte(rng.IntN(256))
			}
			if want == 8 && (b[i] < 0x20 || b[i] == '"' || b[i] == '\\') {
				want = i
			}
		}
		if got := bits.TrailingZeros64(special8(binary.LittleEndian.Uint64(b[:]))) >> 3; got != want {
			t.Fatalf("special8(%q) flags byte %d first; want %d", b, got, want)
		}
	}
}

// TestEachValue: a comma-separated list of values is read value by value;
// what is not one fails with ErrBadValue and the byte where it stopped,
// and fn's own error comes back as it is.
func TestEachValue(t *testing.T) {
	var got []string
	err := EachValue([]byte(` {"a":[1]} ,"x",  3 `), func(raw []byte) error {
		got = append(got, string(raw))
		return nil
	})
	if err != nil || len(got) != 3 || got[0] != `{"a":[1]}` || got[1] != `"x"` || got[2] != `3` {
		t.Fatalf("EachValue: %q, %v", got, err)
	}
	for in, want := range map[string]string{`1,`: "bad value at byte 2", `1 2`: "bad value at byte 2", `{`: "bad value at byte 1", ``: "bad value at byte 0"} {
		err := EachValue([]byte(in), func([]byte) error { return nil })
		if !errors.Is(err, ErrBadValue) || err.Error() != want {
			t.Errorf("EachValue(%q): %v; want %s", in, err, want)
		}
	}
	stop := errors.New("stop")
	if err := EachValue([]byte(`1,2`), func([]byte) error { return stop }); err != stop {
		t.Errorf("EachValue passed on %v; want fn's error", err)
	}
}
