package eval

import (
	"fmt"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/bpe"
)

// tokens counts the tokens an agent reads and writes for tool calls.
type tokens struct{ enc *bpe.Encoder }

func newTokens() (*tokens, error) {
	enc, err := bpe.Load("cl100k_base")
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	return &tokens{enc}, nil
}

// step is the tokens of a call's arguments and result (or error).
func (t *tokens) step(s *hindsight.Step) int {
	n := t.enc.Count(string(s.Arguments)) + t.enc.Count(string(s.Result))
	if s.Error != nil {
		n += t.enc.Count(s.Error.Message)
	}
	return n
}

// failure is the tokens of the failed call calls[i] and of the calls of
// its tool that followed up to the first success, that one included (what
// the failure went on to cost), less the calls already in counted, which
// it adds them to.
func (t *tokens) failure(calls []*hindsight.Step, i int, counted map[*hindsight.Step]bool) int {
	n := 0
	for j, s := range calls[i:] {
		if j > 0 && s.Tool != calls[i].Tool {
			continue
		}
		if !counted[s] {
			counted[s] = true
			n += t.step(s)
		}
		if j > 0 && !s.Failed() {
			break
		}
	}
	return n
}
