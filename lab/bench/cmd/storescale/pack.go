//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// packDate is every synthetic experience's creation date.
var packDate = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// words is a vocabulary of made-up words (two or three syllables), so
// that BM25 has terms of every frequency to rank by.
func words(rng *rand.Rand, n int) []string {
	cons, vows := "bdfgklmnprtvz", "aeiou" // no "s": "sudo" is refused as a command
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		var b strings.Builder
		for range 2 + rng.IntN(2) {
			b.WriteByte(cons[rng.IntN(len(cons))])
			b.WriteByte(vows[rng.IntN(len(vows))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// phrase is k words of vocab, drawn with a skew towards the first ones.
func phrase(rng *rand.Rand, vocab []string, k int) string {
	ws := make([]string, k)
	for i := range ws {
		ws[i] = vocab[int(float64(len(vocab))*rng.Float64()*rng.Float64())]
	}
	return strings.Join(ws, " ")
}

// experience is synthetic experience i.
func experience(rng *rand.Rand, vocab []string, i int) hindsight.Experience {
	tool := fmt.Sprintf("tool_%d", i%60)
	return hindsight.Experience{
		ID: fmt.Sprintf("scale-%07d", i), Server: fmt.Sprintf("srv%d", i%6), Tool: tool,
		ErrorCode: fmt.Sprintf("E%d", i%9), Situation: "while " + phrase(rng, vocab, 8),
		Action: "called " + tool + " with " + phrase(rng, vocab, 5), Result: "failed: " + phrase(rng, vocab, 4),
		Lesson:     "Call " + tool + " only after " + phrase(rng, vocab, 7) + fmt.Sprintf(" (case %d).", i),
		Confidence: 0.8, CreatedAt: packDate, UpdatedAt: packDate,
	}
}

// writePack writes n synthetic experiences to files of at most perFile
// lines under dir, plus a small extra file (the writes before the
// SIGKILL, last in the list), and returns the files and the texts of q
// searches, each made of words of one stored experience.
func writePack(dir string, n, perFile, q int) ([]string, []string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("write pack: %w", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := words(rng, 20000)
	var files, queries []string
	write := func(from, to int) error {
		name := filepath.Join(dir, fmt.Sprintf("part-%07d.jsonl", from))
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, 1<<20)
		enc := json.NewEncoder(w)
		for i := from; i < to; i++ {
			e := experience(rng, vocab, i)
			if err := enc.Encode(&e); err != nil {
				f.Close()
				return err
			}
			if len(queries) < q && rng.IntN(max(1, n/q)) == 0 {
				s := strings.Fields(e.Situation)
				queries = append(queries, e.Tool+" "+strings.Join(s[1:5], " "))
			}
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		files = append(files, name)
		return f.Close()
	}
	for from := 0; from < n; from += perFile {
		if err := write(from, min(from+perFile, n)); err != nil {
			return nil, nil, fmt.Errorf("write pack: %w", err)
		}
	}
	for len(queries) < q {
		queries = append(queries, phrase(rng, vocab, 4))
	}
	if err := write(n, n+200); err != nil {
		return nil, nil, fmt.Errorf("write pack: %w", err)
	}
	return files, queries, nil
}
