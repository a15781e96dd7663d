// Package embedder provides Hindsight's embedders: a built-in local one that
// needs no network and no model, and a client for OpenAI-compatible
// embeddings endpoints.
package embedder

import (
	"context"
	"fmt"
	"math"

	"github.com/hindsight-proxy/hindsight/store/tokenize"
)

// DefaultLocalDim is the dimension of the local embedder when none is given.
const DefaultLocalDim = 512

// Local is a feature-hashing embedder. It needs no model download and no
// network, and is deterministic across machines and releases of the same
// name.
//
// It is honest lexical similarity, not semantics: each text becomes a bag of
// its lowercased words (tokenize.IndexTerms, so CJK text contributes
// character bigrams) and the character trigrams of those words, each hashed
// with FNV-1a into one of Dim buckets with a hashed sign, weighted
// sublinearly by frequency, and L2-normalised. Two texts are close when they
// share words or word fragments ("timeout", "timed out", "time-outs"), so it
// tolerates inflection, typos and reordering, but it does not know that
// "permission denied" and "EACCES" mean the same thing. Configure an
// OpenAI-compatible embedding model for that.
type Local struct {
	dim int
}

// NewLocal returns a local embedder of dimension dim (DefaultLocalDim when
// dim <= 0).
func NewLocal(dim int) *Local {
	if dim <= 0 {
		dim = DefaultLocalDim
	}
	return &Local{dim: dim}
}

// Name identifies the hashing scheme; change it when the features change.
func (l *Local) Name() string { return "hindsight-hash-v1" }

// Dim returns the vector dimension.
func (l *Local) Dim() int { return l.dim }

// Embed returns one L2-normalised vector per text. An empty text yields the
// zero vector.
func (l *Local) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var terms, order []string
	counts := map[string]int{}
	for i, t := range texts {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("embed texts: %w", err)
			}
		}
		terms = tokenize.IndexTerms(terms[:0], t)
		clear(counts)
		order = order[:0]
		for _, w := range terms {
			if counts[w] == 0 {
				order = append(order, w)
			}
			counts[w]++
		}
		out[i] = l.vector(order, counts)
	}
	return out, nil
}

// vector embeds the words of order (each once, in the order they first
// appear) with their counts. The order is fixed so that the same text
// always sums its features in the same order: the same vector to the bit.
func (l *Local) vector(order []string, counts map[string]int) []float32 {
	v := make([]float32, l.dim)
	for _, w := range order {
		c := counts[w]
		tf := float32(1 + math.Log(float64(c)))
		l.add(v, 'w', w, tf)
		// Character trigrams of the padded word, at half weight shared
		// between them, make "timeout" close to "timeouts" and "timed".
		rs := []rune("^" + w + "$")
		if len(rs) <= 4 { // short words and CJK bigrams: the word is enough
			continue
		}
		n := len(rs) - 2
		g := tf * 0.5 / float32(math.Sqrt(float64(n)))
		for k := 0; k < n; k++ {
			l.add(v, 'g', string(rs[k:k+3]), g)
		}
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm > 0 {
		inv := float32(1 / math.Sqrt(norm))
		for k := range v {
			v[k] *= inv
		}
	}
	return v
}

// add hashes kind and feature with 64-bit FNV-1a into a bucket and a sign.
func (l *Local) add(v []float32, kind byte, feature string, w float32) {
	const offset, prime = 14695981039346656037, 1099511628211
	s := uint64(offset)
	s ^= uint64(kind)
	s *= prime
	for i := 0; i < len(feature); i++ {
		s ^= uint64(feature[i])
		s *= prime
	}
	idx := int(s % uint64(l.dim))
	if s>>63 == 1 {
		w = -w
	}
	v[idx] += w
}
