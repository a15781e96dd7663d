package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// retrievalDir holds the store's retrieval benchmarks; realPrefix names
// the set built here from the committed corpora.
const (
	retrievalDir = "../store/testdata/retrieval"
	realPrefix   = "real-"
)

// TestRetrievalSetData builds the real retrieval set (lessons of every
// committed corpus, queries from the real corpora's unseen failing calls)
// and, with -update, writes it to store/testdata/retrieval, where
// store/embedded's TestRetrieval measures it. The committed set is frozen:
// a reflector that learns other lessons logs the difference here, and the
// set changes only when rewritten on purpose.
func TestRetrievalSetData(t *testing.T) {
	var corpora []Corpus
	for _, dir := range realCorpora {
		steps, labels, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		corpora = append(corpora, Corpus{Name: filepath.Base(dir), Steps: steps, Labels: labels, Queries: dir != corpusDir})
	}
	exps, qs, err := RetrievalSet(context.Background(), corpora, realPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 30 || len(exps) < 30 {
		t.Fatalf("%d queries over %d experiences; want at least 30 of each", len(qs), len(exps))
	}
	ids := map[string]bool{}
	for _, e := range exps {
		ids[e.ID] = true
	}
	for _, q := range qs {
		if !ids[q.Want] || len(q.Relevant) == 0 || q.Relevant[0] != q.Want || q.ErrorTemplate == "" {
			t.Errorf("query %+v", q)
		}
	}
	for name, got := range map[string][]byte{"experiences.jsonl": jsonLines(t, exps), "queries.jsonl": jsonLines(t, qs)} {
		path := filepath.Join(retrievalDir, realPrefix+name)
		if testkit.Update() {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		committed, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(committed, got) {
			t.Logf("%s differs from what the corpora teach now (rewrite with -update on purpose)", path)
		}
	}
}

func jsonLines[T any](t *testing.T, xs []T) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i := range xs {
		if err := enc.Encode(&xs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}
