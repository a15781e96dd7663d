package inject

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight/bpe"
)

// Encoding is the tokenizer every cap is counted with: OpenAI's cl100k_base,
// loaded from the copy compiled into the binary (no network).
const Encoding = "cl100k_base"

var (
	encOnce sync.Once
	enc     *bpe.Encoder
	encErr  error
	// encLoaded tells whether encoder has run (for tests).
	encLoaded atomic.Bool
)

// tokenizer is what counting and cutting need of an encoding.
type tokenizer interface {
	Encode(s string) []int
	Count(s string) int
	Decode(tokens []int) string
}

// encoder returns the shared tokenizer, loading it on first use (about
// 10 ms, 2 MB). It is safe for concurrent use.
func encoder() (*bpe.Encoder, error) {
	encOnce.Do(func() {
		encLoaded.Store(true)
		enc, encErr = bpe.Load(Encoding)
		if encErr != nil {
			encErr = fmt.Errorf("load tokenizer %s: %w", Encoding, encErr)
		}
	})
	return enc, encErr
}

// CountTokens returns the number of cl100k_base tokens in s. When the
// tokenizer cannot be loaded it overestimates (one token per byte), so caps
// still hold.
func CountTokens(s string) int {
	if n, ok := knownCounts[s]; ok {
		return n
	}
	e, err := encoder()
	if err != nil {
		return len(s)
	}
	return e.Count(s)
}

// knownCounts are the token counts of the fixed texts injected when there
// is no lesson (the pointer of every configuration, see Injector.pointer,
// with and without the separator), so that a sidecar whose daemon has no
// lessons never loads the tokenizer. TestKnownCounts checks them against the
// tokenizer and TestNoLessonsNoTokenizer that such a sidecar never loads it.
var knownCounts = map[string]int{
	Marker + " " + queryPointer:                                  32,
	"\n\n" + Marker + " " + queryPointer:                         33,
	Marker + " " + queryPointer + " " + endTaskHint:              66,
	"\n\n" + Marker + " " + queryPointer + " " + endTaskHint:     67,
	Marker + " " + queryPointer + " " + endTaskToolHint:          73,
	"\n\n" + Marker + " " + queryPointer + " " + endTaskToolHint: 74,
	Marker + " " + endTaskHint:                                   37,
	"\n\n" + Marker + " " + endTaskHint:                          38,
	Marker + " " + endTaskToolHint:                               44,
	"\n\n" + Marker + " " + endTaskToolHint:                      45,
	queryHeader:                                                  13,
	ellipsis:                                                     1,
}

// ellipsis marks text that was cut to fit a cap.
const ellipsis = "…"

// TruncateTokens returns s cut to at most max tokens. A cut string ends in
// "…" (counted within max) and never splits a UTF-8 sequence.
func TruncateTokens(s string, max int) string {
	if max <= 0 {
		return ""
	}
	e, err := encoder()
	if err != nil {
		if len(s) <= max {
			return s
		}
		return validPrefix(s[:max])
	}
	return truncate(e, s, max)
}

// truncate is TruncateTokens with the tokenizer tk.
func truncate(tk tokenizer, s string, max int) string {
	toks := tk.Encode(s)
	if len(toks) <= max {
		return s
	}
	// Leave room for the ellipsis, then make sure the decoded prefix, which
	// may re-tokenize differently, still fits.
	for n := max - knownCounts[ellipsis]; n > 0; n-- {
		out := strings.TrimRight(validPrefix(tk.Decode(toks[:n])), " \t\n") + ellipsis
		if tk.Count(out) <= max {
			return out
		}
	}
	return ""
}

// validPrefix drops a trailing partial UTF-8 sequence (a token boundary may
// fall inside a multi-byte character) and any invalid bytes.
func validPrefix(s string) string {
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "")
}
