// Package store holds what Hindsight's experience store backends share: the
// text an experience is indexed and embedded by, the embedder identity
// recorded with each vector, and near-duplicate detection for reflection.
//
// The backends are store/embedded (Badger on disk, indexes in memory; the
// default) and store/weaviate. Both implement hindsight.ExperienceStore,
// rank with store/rank and pass the conformance suite in store/storetest.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/hindsight-proxy/hindsight"
)

// ErrDimension is returned when a vector does not fit the store: its length
// differs from the store's embedder, or it was made by another embedder.
// Vectors of different embedders are never mixed in one index.
var ErrDimension = errors.New("vector dimension or embedder mismatch")

// EmbedderID is what a store records with each vector: the embedder's name
// and dimension, e.g. "hindsight-hash-v1/512".
func EmbedderID(emb hindsight.Embedder) string {
	return fmt.Sprintf("%s/%d", emb.Name(), emb.Dim())
}

// Text is the text of e that is indexed and embedded: tool, error code,
// situation, action, result and lesson.
func Text(e *hindsight.Experience) string {
	var b strings.Builder
	for _, s := range []string{e.Tool, e.ErrorCode, e.Situation, e.Action, e.Result, e.Lesson} {
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	return b.String()
}

// Reembedder is implemented by both backends. After the configured
// embedder changed, NeedsReembed reports how many experiences hold vectors
// of another embedder (they are found by text only meanwhile, and the
// Weaviate backend refuses writes), and Reembed recomputes every vector
// with emb. progress, if not nil, is called as batches are embedded (the
// daemon shows a progress bar). A daemon does, at start:
//
//	if r, ok := st.(store.Reembedder); ok && r.NeedsReembed() > 0 {
//		err = r.Reembed(ctx, emb, bar)
//	}
type Reembedder interface {
	NeedsReembed() int
	Reembed(ctx context.Context, emb hindsight.Embedder, progress func(done, total int)) error
}

// Validate checks what a store cannot keep, before anything is written:
// ids and namespaces with NUL or over 256 bytes, a confidence outside
// [0, 1], an experience with no situation, action or lesson.
func Validate(e *hindsight.Experience) error {
	switch {
	case strings.ContainsRune(e.ID, 0) || strings.ContainsRune(e.Namespace, 0):
		return errors.New("id and namespace must not contain NUL")
	case len(e.ID) > 256 || len(e.Namespace) > 256:
		return errors.New("id and namespace are limited to 256 bytes")
	case math.IsNaN(e.Confidence) || e.Confidence < 0 || e.Confidence > 1:
		return fmt.Errorf("confidence %v is outside [0, 1]", e.Confidence)
	case strings.TrimSpace(e.Situation+e.Lesson+e.Action) == "":
		return errors.New("experience has no situation, action or lesson")
	}
	return nil
}

// Cosine returns the cosine similarity of a and b (0 when either is zero or
// their lengths differ).
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// DefaultDuplicateThreshold is the cosine similarity above which reflection
// treats two experiences as the same lesson.
const DefaultDuplicateThreshold = 0.9

// FindSimilar returns the live experiences of e's namespace whose vectors
// have cosine similarity of at least threshold (DefaultDuplicateThreshold
// when threshold <= 0) with e, most similar first; Score holds the cosine.
// e itself (same id) is left out.
//
// It asks s for the best lexical and vector candidates with e's text,
// server and tool (without counting hits) and compares vectors exactly, so
// it works on every backend. Reflection calls it before inserting a lesson
// and merges into (or supersedes) a near-duplicate instead.
func FindSimilar(ctx context.Context, s hindsight.ExperienceStore, emb hindsight.Embedder, e *hindsight.Experience, threshold float64) ([]hindsight.ScoredExperience, error) {
	if threshold <= 0 {
		threshold = DefaultDuplicateThreshold
	}
	vec := e.Vector
	if len(vec) != emb.Dim() {
		vs, err := emb.Embed(ctx, []string{Text(e)})
		if err != nil {
			return nil, fmt.Errorf("find similar: %w", err)
		}
		vec = vs[0]
	}
	cands, err := s.Search(ctx, hindsight.Query{
		Text: Text(e), Namespace: e.Namespace, Server: e.Server, Tool: e.Tool,
		K: 50, NoHit: true,
	})
	if err != nil {
		return nil, fmt.Errorf("find similar: %w", err)
	}
	// Backends may return results without vectors (Weaviate does): embed
	// those in one call.
	var texts []string
	var missing []int
	for i := range cands {
		if len(cands[i].Vector) != len(vec) {
			texts = append(texts, Text(&cands[i].Experience))
			missing = append(missing, i)
		}
	}
	if len(texts) > 0 {
		vs, err := emb.Embed(ctx, texts)
		if err != nil {
			return nil, fmt.Errorf("find similar: %w", err)
		}
		for k, i := range missing {
			cands[i].Vector = vs[k]
		}
	}
	var out []hindsight.ScoredExperience
	for _, c := range cands {
		if c.ID == e.ID {
			continue
		}
		if sim := Cosine(vec, c.Vector); sim >= threshold {
			c.Score = sim
			c.Explain = nil
			out = append(out, c)
		}
	}
	for i := 1; i < len(out); i++ { // insertion sort: a handful of results
		for j := i; j > 0 && out[j].Score > out[j-1].Score; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// ListOrder sorts experiences as every backend lists them, oldest first
// (then by namespace and id, so the order is total), and keeps at most
// limit of them when limit > 0.
func ListOrder(list []hindsight.Experience, limit int) []hindsight.Experience {
	sort.Slice(list, func(i, j int) bool {
		if !list[i].CreatedAt.Equal(list[j].CreatedAt) {
			return list[i].CreatedAt.Before(list[j].CreatedAt)
		}
		if list[i].Namespace != list[j].Namespace {
			return list[i].Namespace < list[j].Namespace
		}
		return list[i].ID < list[j].ID
	})
	if limit > 0 && len(list) > limit {
		list = list[:limit]
	}
	return list
}

// Importer is implemented by the Weaviate store, which several daemons
// share: Import writes experiences over stored ones without a version
// check, as writes that give way to any edit made on the version they
// carry, so an import racing an edit from another process keeps the edit
// (a Put made at the same moment could not tell it came later).
type Importer interface {
	Import(ctx context.Context, exps []*hindsight.Experience) error
}

// Purger is implemented by both backends: Purge removes experiences for
// good (no soft delete): their documents, vectors and index entries, so
// that a secret that escaped redaction can be erased. Ids that do not
// exist are ignored; it returns how many were removed. The embedded store
// also compacts its files so that the bytes leave the disk.
type Purger interface {
	Purge(ctx context.Context, namespace string, ids []string) (int, error)
}
