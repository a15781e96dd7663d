package errtemplate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

const key = "payments\x00charge"

func TestOptionsDefaults(t *testing.T) {
	got := NewMiner(Options{}).Options()
	want := Options{Depth: 4, Similarity: 0.5, MaxChildren: 100, MaxClusters: 1000, MaxTokens: 64}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	got = NewMiner(Options{Depth: 1, Similarity: 3, MaxChildren: -1}).Options()
	if got.Depth != 2 || got.Similarity != 1 || got.MaxChildren != 100 {
		t.Errorf("clamped %+v", got)
	}
	var zero Miner
	if c, changed := zero.Add(key, "boom 1"); !changed || c.Template != "boom <*>" {
		t.Errorf("zero Miner Add = %+v, %v", c, changed)
	}
}

func TestAddJoinsAndGeneralises(t *testing.T) {
	m := NewMiner(Options{})
	a, changed := m.Add(key, "payment amount does not add up, total price is 1203, but paid 833")
	if !changed || a.Size != 1 || a.Template != "payment amount does not add up, total price is <*>, but paid <*>" {
		t.Fatalf("first Add = %+v, %v", a, changed)
	}
	sum := sha256.Sum256([]byte(key + "\x00" + a.Template))
	if want := "tpl_" + hex.EncodeToString(sum[:])[:12]; a.ID != want {
		t.Errorf("ID %s, want %s", a.ID, want)
	}
	b, changed := m.Add(key, "payment amount does not add up, total price is 455, but paid 400")
	if changed || b.ID != a.ID || b.Size != 2 || b.Template != a.Template {
		t.Errorf("second Add = %+v, %v; want %s unchanged with size 2", b, changed, a.ID)
	}
	c, changed := m.Add(key, "missing required argument: currency")
	if !changed || c.ID == a.ID {
		t.Errorf("other error joined: %+v, %v", c, changed)
	}
	if got := m.Clusters(key); len(got) != 2 {
		t.Errorf("Clusters = %+v, want 2", got)
	}
	if got := m.Clusters("other"); got != nil {
		t.Errorf("Clusters of an unknown key = %+v", got)
	}
	if _, ok := m.Match("other", "missing required argument: currency"); ok {
		t.Error("Match under an unknown key")
	}
}

// TestDrift: a word that was constant at position N varies at last; the
// cluster keeps its ID and its template gets a wildcard at N.
func TestDrift(t *testing.T) {
	m := NewMiner(Options{})
	var first Cluster
	for i := range 5 {
		c, changed := m.Add(key, fmt.Sprintf("card declined by issuer visa for order ord_%d", i))
		if i == 0 {
			first = c
		} else if changed || c.ID != first.ID {
			t.Fatalf("text %d: %+v changed=%v; want %s unchanged", i, c, changed, first.ID)
		}
	}
	if first.Template != "card declined by issuer visa for order <*>" {
		t.Fatalf("template %q", first.Template)
	}
	if !Same(first.Template, "card declined by issuer visa for order ord_9") || Same(first.Template, "card declined by issuer amex for order ord_9") {
		t.Error("Same before the drift")
	}
	c, changed := m.Add(key, "card declined by issuer amex for order ord_77")
	if !changed || c.ID != first.ID || c.Size != 6 {
		t.Fatalf("drift Add = %+v, %v; want %s changed with size 6", c, changed, first.ID)
	}
	if want := "card declined by issuer <*> for order <*>"; c.Template != want {
		t.Errorf("template %q, want %q", c.Template, want)
	}
	if c2, changed := m.Add(key, "card declined by issuer visa for order ord_1"); changed || c2.Template != c.Template {
		t.Errorf("the old word again: %+v, %v", c2, changed)
	}
	if n := len(m.Clusters(key)); n != 1 {
		t.Errorf("%d clusters, want 1", n)
	}
}

func TestMatchIsReadOnly(t *testing.T) {
	m := NewMiner(Options{})
	a, _ := m.Add(key, "user bob not found in tenant acme")
	before, _ := json.Marshal(m)
	c, ok := m.Match(key, "user bob not found in tenant globex")
	if !ok || c != a {
		t.Errorf("Match = %+v, %v; want %+v", c, ok, a)
	}
	if _, ok := m.Match(key, "quota exceeded for tenant acme today"); ok {
		t.Error("Match of an unrelated text")
	}
	after, _ := json.Marshal(m)
	if !bytes.Equal(before, after) {
		t.Error("Match changed the miner")
	}
}

func TestSimilarityThreshold(t *testing.T) {
	for _, tt := range []struct {
		sim  float64
		want int
	}{{0.5, 1}, {0.6, 2}} {
		m := NewMiner(Options{Similarity: tt.sim})
		m.Add(key, "a b c d")
		m.Add(key, "a b x y") // 2 of 4 positions equal
		if n := len(m.Clusters(key)); n != tt.want {
			t.Errorf("Similarity %v: %d clusters, want %d", tt.sim, n, tt.want)
		}
	}
}

func TestTieBreakPrefersWildcards(t *testing.T) {
	m := NewMiner(Options{Depth: 3})
	// Both clusters route to leaf "x"; the second text fits both with 3 of 4 equal.
	g, _ := m.Add(key, "x a b c")
	m.Add(key, "x a b d") // g becomes "x a b <*>"
	lit, _ := m.Add(key, "x q r c")
	if lit.ID == g.ID {
		t.Fatal("setup: one cluster")
	}
	c, ok := m.Match(key, "x a b e")
	if !ok || c.ID != g.ID {
		t.Errorf("Match = %+v, %v; want %s", c, ok, g.ID)
	}
}

func TestRoutingFirstTokens(t *testing.T) {
	// Depth 4 routes by the first two tokens: a different second word is
	// another leaf, so those texts never join, even when similar.
	m := NewMiner(Options{})
	a, _ := m.Add(key, "user Alice Smith not found")
	b, _ := m.Add(key, "user Bob Jones not found")
	if a.ID == b.ID {
		t.Errorf("depth 4 joined %q", b.Template)
	}
	// Depth 3 routes by the first token only, as drain3 does with depth 4.
	m = NewMiner(Options{Depth: 3})
	a, _ = m.Add(key, "user Alice Smith not found")
	b, changed := m.Add(key, "user Bob Jones not found")
	if a.ID != b.ID || !changed || b.Template != "user <*> <*> not found" {
		t.Errorf("depth 3: %+v, %v", b, changed)
	}
	// The last token never routes: two-token texts join on their first.
	a, _ = m.Add(key, "unknown currency")
	b, _ = m.Add(key, "unknown locale")
	if a.ID != b.ID || b.Template != "unknown <*>" {
		t.Errorf("two tokens: %+v", b)
	}
}

func TestMaxChildren(t *testing.T) {
	m := NewMiner(Options{MaxChildren: 3, Depth: 3})
	// First tokens a, b get children; the third child is "<*>", shared by c and d.
	for _, s := range []string{"a fails now", "b fails now", "c fails now", "d fails now"} {
		m.Add(key, s)
	}
	got := m.Clusters(key)
	if len(got) != 3 {
		t.Fatalf("clusters %+v, want 3", got)
	}
	c, ok := m.Match(key, "e fails now")
	if !ok || c.Template != "<*> fails now" || c.Size != 2 {
		t.Errorf("overflow cluster %+v, %v", c, ok)
	}
	root := m.keys[key].roots[3]
	if len(root.children) != 3 || root.children[Wildcard] == nil {
		t.Errorf("children %v", root.children)
	}
}

func TestMaxClustersEvictsLRU(t *testing.T) {
	m := NewMiner(Options{MaxClusters: 2})
	a, _ := m.Add(key, "alpha failed badly")
	b, _ := m.Add(key, "beta is unreachable now today")
	m.Add(key, "alpha failed badly") // a is now more recent than b
	c, _ := m.Add(key, "gamma timed out")
	got := m.Clusters(key)
	if len(got) != 2 {
		t.Fatalf("clusters %+v", got)
	}
	for _, cl := range got {
		if cl.ID == b.ID {
			t.Errorf("least recently used %s not evicted", b.ID)
		}
	}
	if _, ok := m.Match(key, "beta is unreachable now today"); ok {
		t.Error("evicted cluster still matches")
	}
	if x, ok := m.Match(key, "alpha failed badly"); !ok || x.ID != a.ID {
		t.Error("recent cluster lost")
	}
	if x, ok := m.Match(key, "gamma timed out"); !ok || x.ID != c.ID {
		t.Error("new cluster lost")
	}
	// The evicted template comes back under its old ID.
	if b2, changed := m.Add(key, "beta is unreachable now today"); !changed || b2.ID != b.ID || b2.Size != 1 {
		t.Errorf("re-created %+v, %v; want %s", b2, changed, b.ID)
	}
}

func TestIDCollision(t *testing.T) {
	m := NewMiner(Options{})
	a, _ := m.Add(key, "a b c d")
	// A second cluster whose first template hashes to a taken ID (in practice a
	// 48-bit hash collision) gets the next free one.
	id := m.keys[key].newID(key, Tokens("a b c d"))
	sum := sha256.Sum256([]byte(key + "\x00a b c d\x001"))
	if want := "tpl_" + hex.EncodeToString(sum[:6]); id != want || id == a.ID {
		t.Errorf("newID = %s, want %s (taken: %s)", id, want, a.ID)
	}
}

func TestMaxTokens(t *testing.T) {
	m := NewMiner(Options{MaxTokens: 3})
	a, _ := m.Add(key, "stack trace: at frame 1 at frame 2")
	b, changed := m.Add(key, "stack trace: at frame 9")
	if a.Template != "stack trace: at" || b.ID != a.ID || changed {
		t.Errorf("cut texts: %+v, %+v, %v", a, b, changed)
	}
}

func TestEmptyText(t *testing.T) {
	m := NewMiner(Options{})
	a, changed := m.Add(key, "")
	b, changed2 := m.Add(key, "   ")
	if !changed || changed2 || a.ID != b.ID || b.Template != "" || b.Size != 2 {
		t.Errorf("empty texts: %+v %v, %+v %v", a, changed, b, changed2)
	}
}

type step struct {
	key, text string
}

// trace returns n texts from a few templates with random values, under three keys.
func trace(seed uint64, n int) []step {
	r := rand.New(rand.NewPCG(seed, 1))
	forms := []string{
		"payment amount does not add up, total price is %d, but paid %d",
		"reservation %s not found",
		"user %s not found",
		"invalid date format '%d/%d/2025', expected YYYY-MM-DD",
		"HTTP %d %s",
		"Retry after %d ms",
		"missing required argument: %s",
		"event %s overlaps with %s",
		"file /home/%s/%d.txt is locked by %s",
		"%s %s failed",
	}
	words := []string{"alice", "bob", "currency", "amount", "Unauthorized", "Not", "visa", "amex", "lock", "sync"}
	codes := []int{401, 404, 429, 500}
	keys := []string{"pay\x00charge", "air\x00book", "fs\x00read"}
	out := make([]step, n)
	for i := range out {
		f := forms[r.IntN(len(forms))]
		var args []any
		for j := 0; j < strings.Count(f, "%"); j++ {
			switch {
			case strings.HasPrefix(f, "HTTP") && j == 0:
				args = append(args, codes[r.IntN(len(codes))])
			case r.IntN(3) == 0:
				args = append(args, fmt.Sprintf("id%x", r.Uint32()))
			default:
				args = append(args, words[r.IntN(len(words))])
			}
		}
		out[i] = step{keys[r.IntN(len(keys))], fmt.Sprintf(f, args...)}
	}
	return out
}

// TestPersistRoundTrip saves a miner halfway, restores it into another one and
// checks both give the same answers as a miner that was never saved.
func TestPersistRoundTrip(t *testing.T) {
	for _, opt := range []Options{{}, {MaxClusters: 4, MaxChildren: 3, Depth: 5, Similarity: 0.4, MaxTokens: 6}} {
		t.Run(fmt.Sprintf("%+v", opt), func(t *testing.T) {
			steps := trace(7, 600)
			live := NewMiner(opt)
			for _, s := range steps[:300] {
				live.Add(s.key, s.text)
			}
			saved, err := json.Marshal(live)
			if err != nil {
				t.Fatal(err)
			}
			restored := NewMiner(Options{Depth: 9}) // options come from the state
			if err := json.Unmarshal(saved, restored); err != nil {
				t.Fatal(err)
			}
			if got, want := restored.Options(), live.Options(); got != want {
				t.Errorf("options %+v, want %+v", got, want)
			}
			again, err := json.Marshal(restored)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(saved, again) {
				t.Fatal("restored miner marshals differently")
			}
			for i, s := range steps[300:] {
				mw, okw := live.Match(s.key, s.text)
				mg, okg := restored.Match(s.key, s.text)
				if mw != mg || okw != okg {
					t.Fatalf("step %d Match: restored %+v %v, live %+v %v", i, mg, okg, mw, okw)
				}
				aw, cw := live.Add(s.key, s.text)
				ag, cg := restored.Add(s.key, s.text)
				if aw != ag || cw != cg {
					t.Fatalf("step %d Add(%q): restored %+v %v, live %+v %v", i, s.text, ag, cg, aw, cw)
				}
			}
			for _, k := range []string{"pay\x00charge", "air\x00book", "fs\x00read"} {
				if w, g := fmt.Sprint(live.Clusters(k)), fmt.Sprint(restored.Clusters(k)); w != g {
					t.Errorf("Clusters(%q): restored %s, live %s", k, g, w)
				}
			}
			w, _ := json.Marshal(live)
			g, _ := json.Marshal(restored)
			if !bytes.Equal(w, g) {
				t.Error("final states differ")
			}
		})
	}
}

func TestUnmarshalErrors(t *testing.T) {
	m := NewMiner(Options{})
	m.Add(key, "reservation KA7I60 not found")
	good, _ := json.Marshal(m)
	for name, data := range map[string]string{
		"not json":        `{`,
		"version":         `{"version":2,"options":{},"keys":[]}`,
		"duplicate key":   `{"version":1,"options":{},"keys":[{"key":"a","clusters":[],"tree":{}},{"key":"a","clusters":[],"tree":{}}]}`,
		"unknown cluster": `{"version":1,"options":{},"keys":[{"key":"a","clusters":[],"tree":{"1":{"clusters":["tpl_x"]}}}]}`,
		"orphan cluster":  `{"version":1,"options":{},"keys":[{"key":"a","clusters":[{"id":"tpl_x","tokens":["a"]}],"tree":{}}]}`,
		"wrong length":    `{"version":1,"options":{},"keys":[{"key":"a","clusters":[{"id":"tpl_x","tokens":["a"]}],"tree":{"2":{"clusters":["tpl_x"]}}}]}`,
		"two leaves":      `{"version":1,"options":{},"keys":[{"key":"a","clusters":[{"id":"tpl_x","tokens":["a"]}],"tree":{"1":{"clusters":["tpl_x","tpl_x"]}}}]}`,
		"null node":       `{"version":1,"options":{},"keys":[{"key":"a","clusters":[],"tree":{"1":null}}]}`,
	} {
		if err := m.UnmarshalJSON([]byte(data)); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "decode miner: ") && !strings.HasPrefix(err.Error(), "restore miner: ") {
			t.Errorf("%s: error %q", name, err)
		}
	}
	after, _ := json.Marshal(m)
	if !bytes.Equal(good, after) {
		t.Error("a failed Unmarshal changed the miner")
	}
}

// TestConcurrent is meant for -race: Add, Match, Clusters and MarshalJSON from
// several goroutines, then every Add is counted once.
func TestConcurrent(t *testing.T) {
	m := NewMiner(Options{})
	steps := trace(3, 1600)
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(steps); i += workers {
				s := steps[i]
				c, _ := m.Add(s.key, s.text)
				// Other goroutines may generalise a rival cluster meanwhile,
				// but c only grows more similar to the text: some cluster fits.
				if _, ok := m.Match(s.key, s.text); !ok {
					t.Errorf("no Match after Add of %q (to %s)", s.text, c.ID)
				}
				if i%100 == 0 {
					if _, err := json.Marshal(m); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, k := range []string{"pay\x00charge", "air\x00book", "fs\x00read"} {
		for _, c := range m.Clusters(k) {
			total += c.Size
		}
	}
	if total != len(steps) {
		t.Errorf("sizes add up to %d, want %d", total, len(steps))
	}
}

func BenchmarkAdd10k(b *testing.B) {
	steps := trace(11, 10000)
	b.ReportAllocs()
	for b.Loop() {
		m := NewMiner(Options{})
		for _, s := range steps {
			m.Add(s.key, s.text)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(steps)), "ns/text")
}
