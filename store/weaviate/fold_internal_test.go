package weaviate

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

func baseExp() *hindsight.Experience {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &hindsight.Experience{ID: "x", Namespace: "team", Version: 3, Tool: "upload", Lesson: "retry smaller",
		Situation: "413", Confidence: 0.5, EvidenceCount: 2, EvidenceTasks: []string{"t1", "t2"},
		HitCount: 4, CreatedAt: t0, UpdatedAt: t0}
}

// edit returns the delta of a writer that read base and applied change.
func edit(t *testing.T, base *hindsight.Experience, at int64, token string, change func(e *hindsight.Experience)) delta {
	t.Helper()
	n := *base
	n.EvidenceTasks = slices.Clone(base.EvidenceTasks)
	change(&n)
	d, err := diff(base, &n)
	if err != nil {
		t.Fatal(err)
	}
	d.Epoch, d.At, d.Token = "e1", at, token
	return d
}

// TestFoldKeepsConcurrentEdits: two writers reinforce the same version
// with different tasks and change different fields; the fold keeps both
// in either order.
func TestFoldKeepsConcurrentEdits(t *testing.T) {
	base := baseExp()
	a := edit(t, base, 10, "a", func(e *hindsight.Experience) {
		e.EvidenceCount++
		e.EvidenceTasks = append(e.EvidenceTasks[1:], "ta")
		e.Lesson = "retry with a 1 MiB chunk"
	})
	b := edit(t, base, 11, "b", func(e *hindsight.Experience) {
		e.EvidenceCount++
		e.EvidenceTasks = append(e.EvidenceTasks, "tb")
		e.Confidence = 0.7
	})
	hs := []hits{{OID: "h1", Epoch: "e1", Count: 2, Last: 20}, {OID: "h2", Epoch: "e1", Count: 1, Last: 30}, {OID: "h3", Epoch: "old", Count: 9, Last: 99}}
	f1, err := fold(base, "e1", nil, []delta{a, b}, hs)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := fold(base, "e1", nil, []delta{b, a}, reversed(hs))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f1, f2) {
		t.Fatalf("fold depends on read order:\n%+v\n%+v", f1, f2)
	}
	if f1.Version != 5 || f1.EvidenceCount != 4 || f1.Lesson != "retry with a 1 MiB chunk" || f1.Confidence != 0.7 {
		t.Fatalf("fold = version %d evidence %d lesson %q confidence %v", f1.Version, f1.EvidenceCount, f1.Lesson, f1.Confidence)
	}
	if want := []string{"t2", "ta", "tb"}; !slices.Equal(f1.EvidenceTasks, want) {
		t.Fatalf("evidence tasks %v, want %v", f1.EvidenceTasks, want)
	}
	if f1.HitCount != 7 || f1.LastHitAt == nil || f1.LastHitAt.UnixNano() != 30 {
		t.Fatalf("hits %d last %v: want the base's 4 and this epoch's counters", f1.HitCount, f1.LastHitAt)
	}
	if f1.UpdatedAt.Before(base.UpdatedAt) || !f1.CreatedAt.Equal(base.CreatedAt) {
		t.Fatalf("created %v updated %v", f1.CreatedAt, f1.UpdatedAt)
	}
}

// TestFoldSameFieldWinner: two edits of one field on one version; the
// later wins in either order, and a cleared field is cleared.
func TestFoldSameFieldWinner(t *testing.T) {
	base := baseExp()
	base.SourceMachine = "host-a/1"
	early := edit(t, base, 10, "z", func(e *hindsight.Experience) { e.Lesson = "early" })
	late := edit(t, base, 12, "a", func(e *hindsight.Experience) { e.Lesson = "late"; e.SourceMachine = "" })
	for _, ds := range [][]delta{{early, late}, {late, early}} {
		f, err := fold(base, "e1", nil, ds, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.Lesson != "late" || f.SourceMachine != "" || f.Version != 5 {
			t.Fatalf("fold = lesson %q machine %q version %d", f.Lesson, f.SourceMachine, f.Version)
		}
	}
	f, err := fold(base, "e2", nil, []delta{early, late}, nil)
	if err != nil || f.Lesson != base.Lesson || f.Version != base.Version {
		t.Fatalf("deltas of another epoch applied: %+v, %v", f, err)
	}
}

// FuzzFold: any deltas decoded from JSON fold without panicking, to the
// same state whatever order they are read in.
func FuzzFold(f *testing.F) {
	f.Add([]byte(`[{"epoch":"e1","base":3,"at":5,"token":"a","set":{"lesson":"x"},"add_tasks":["t9"],"evidence":1},
		{"epoch":"e1","base":3,"at":5,"token":"b","set":{"confidence":0.9,"situation":null},"del_tasks":["t1"]}]`))
	f.Add([]byte(`[{"epoch":"e1","set":{"version":99,"id":"y","source_steps":[1,2]}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ds []delta
		if json.Unmarshal(data, &ds) != nil {
			return
		}
		tokens := map[string]bool{}
		for _, d := range ds {
			if tokens[d.Token] {
				return // tokens are unique (random); the order breaks ties on them
			}
			tokens[d.Token] = true
		}
		base := baseExp()
		f1, err1 := fold(base, "e1", nil, ds, nil)
		f2, err2 := fold(base, "e1", nil, reversed(ds), nil)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("errors differ by order: %v, %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		if f1.ID != base.ID || f1.Namespace != base.Namespace {
			t.Fatalf("a delta changed the identity: %q/%q", f1.Namespace, f1.ID)
		}
		j1, _ := json.Marshal(f1)
		j2, _ := json.Marshal(f2)
		if string(j1) != string(j2) {
			t.Fatalf("fold depends on read order:\n%s\n%s", j1, j2)
		}
		// Two compactors at once: each folds a prefix of its own into a
		// checkpoint (overlapping), and some folded deltas are still
		// stored; a reader of any such mix folds the same state.
		if len(ds) < 2 {
			return
		}
		half := len(ds) / 2
		c1 := gather("e1", nil, ds[:half+1], nil)
		c2 := gather("e1", nil, ds[half:], nil)
		f3, err := fold(base, "e1", []checkpoint{roundTrip(t, c1), roundTrip(t, c2)}, ds[half:half+1], nil)
		if err != nil {
			t.Fatal(err)
		}
		if j3, _ := json.Marshal(f3); string(j3) != string(j1) {
			t.Fatalf("fold of checkpoints differs:\n%s\n%s", j3, j1)
		}
	})
}

// roundTrip returns cp as stored and read back.
func roundTrip(t *testing.T, cp checkpoint) checkpoint {
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	var out checkpoint
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFoldCheckpoints: deltas and hit counters folded into checkpoints in
// any grouping, overlapping or not, with some still stored raw, fold as
// the raw objects alone do.
func TestFoldCheckpoints(t *testing.T) {
	base := baseExp()
	var ds []delta
	for i := range 6 {
		ds = append(ds, edit(t, base, int64(10+i), string(rune('a'+i)), func(e *hindsight.Experience) {
			e.EvidenceCount++
			e.EvidenceTasks = append(e.EvidenceTasks, "t"+string(rune('a'+i)))
			e.Lesson = "lesson " + string(rune('a'+i))
			if i == 3 {
				e.EvidenceTasks = e.EvidenceTasks[1:]
			}
		}))
	}
	h1 := hits{OID: "h1", Epoch: "e1", Count: 3, Last: 40}
	h1later := hits{OID: "h1", Epoch: "e1", Count: 5, Last: 50}
	want, err := fold(base, "e1", nil, ds, []hits{h1later})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		cps []checkpoint
		ds  []delta
		hs  []hits
	}{
		"one checkpoint":             {[]checkpoint{gather("e1", nil, ds, []hits{h1later})}, nil, nil},
		"checkpoint and its deltas":  {[]checkpoint{gather("e1", nil, ds[:4], []hits{h1})}, ds, []hits{h1later}},
		"overlapping checkpoints":    {[]checkpoint{gather("e1", nil, ds[:4], []hits{h1}), gather("e1", nil, ds[2:], []hits{h1later})}, nil, nil},
		"checkpoint of checkpoints":  {[]checkpoint{gather("e1", []checkpoint{gather("e1", nil, ds[:3], nil)}, ds[3:], []hits{h1later})}, ds[:1], nil},
		"counter raised after fold":  {[]checkpoint{gather("e1", nil, ds, []hits{h1})}, nil, []hits{h1later}},
		"another epoch's checkpoint": {[]checkpoint{gather("e1", nil, ds, []hits{h1later}), gather("e0", nil, ds, nil)}, nil, nil},
	} {
		got, err := fold(base, "e1", c.cps, c.ds, c.hs)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: fold = %+v\nwant %+v", name, got, want)
		}
	}
	if want.Version != base.Version+6 || want.HitCount != base.HitCount+5 || want.Lesson != "lesson f" {
		t.Fatalf("fold = version %d hits %d lesson %q", want.Version, want.HitCount, want.Lesson)
	}
}

func reversed[T any](s []T) []T {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// FuzzCheckpoint: any two checkpoints decoded from stored JSON fold
// without panicking, and joining them is commutative and idempotent (what
// lets readers see a compaction half done, or two at once).
func FuzzCheckpoint(f *testing.F) {
	f.Add([]byte(`{"epoch":"e1","fields":{"lesson":{"s":{"b":3,"a":5,"t":"x"},"v":"y"}},"edits":{"x":{"e":1}},"hits":{"h":{"epoch":"e1","count":2,"last":9}}}`),
		[]byte(`{"epoch":"e1","tasks":{"t9":{"s":{"b":3,"w":true,"a":1,"t":"z"},"in":true}},"edits":{"x":{"e":1},"z":{"c":1}},"updated":7}`))
	f.Add([]byte(`{"epoch":"e1","fields":{"version":{"s":{},"v":99},"id":{"s":{},"v":"other"}}}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var x, y checkpoint
		if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
			return
		}
		x.Epoch, y.Epoch = "e1", "e1"
		base := baseExp()
		ab, err1 := fold(base, "e1", []checkpoint{x, y}, nil, nil)
		ba, err2 := fold(base, "e1", []checkpoint{y, x, y}, nil, nil)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("errors differ by order: %v, %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		if ab.ID != base.ID || ab.Namespace != base.Namespace {
			t.Fatalf("a checkpoint changed the identity: %q/%q", ab.Namespace, ab.ID)
		}
		j1, _ := json.Marshal(ab)
		j2, _ := json.Marshal(ba)
		if string(j1) != string(j2) {
			t.Fatalf("join depends on order or repetition:\n%s\n%s", j1, j2)
		}
	})
}
