package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// Meta is what the trace store's ingest reads of a step: its identity,
// and what segmentation and its task's record need. The rest of the step is stored
// as it was delivered.
type Meta struct {
	Source       string
	Seq          uint64
	SessionID    string
	Server       string
	ExplicitTask string
	Transport    string
	HostPID      int
	StartedAt    time.Time
	EndedAt      time.Time
	Failed       bool // hindsight.Step.Failed
}

// Raw is a step to ingest: its JSON encoding (of a hindsight.Step),
// stored as it is, and what ingest reads of it. The stored encoding's
// task_id and step_index are not read back: the step's key says them.
type Raw struct {
	Meta
	JSON []byte

	// When the step came in a request's body, Src is the body and JSON
	// is Src[Off:Off+len(JSON)]: steps next to each other in it can be
	// stored as one slice of it. Src is nil otherwise.
	Src []byte
	Off int
}

// MetaOf returns what ingest reads of s.
func MetaOf(s *hindsight.Step) Meta {
	return Meta{
		Source: s.Source, Seq: s.Seq, SessionID: s.SessionID, Server: s.Server,
		ExplicitTask: s.ExplicitTask, Transport: s.Transport, HostPID: s.HostPID,
		StartedAt: s.StartedAt, EndedAt: s.EndedAt, Failed: s.Failed(),
	}
}

// EncodeSteps encodes steps for ingest.
func EncodeSteps(steps []hindsight.Step) ([]Raw, error) {
	out := make([]Raw, len(steps))
	for i := range steps {
		b, err := AppendStep(nil, &steps[i])
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		out[i] = Raw{Meta: MetaOf(&steps[i]), JSON: b}
	}
	return out, nil
}

// DecodeRaws reads steps each encoded as JSON (a hindsight.Step).
func DecodeRaws(raws []json.RawMessage) ([]Raw, error) {
	out := make([]Raw, len(raws))
	for i, r := range raws {
		if m, ok := scanStep(r); ok {
			out[i] = Raw{Meta: m, JSON: r}
			continue
		}
		var s hindsight.Step
		if err := UnmarshalCompact(r, &s); err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		b, err := AppendStep(nil, &s)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		out[i] = Raw{Meta: MetaOf(&s), JSON: b}
	}
	return out, nil
}

// DecodeBatch decodes the body of POST /v1/steps ({"steps":[…]}). The
// steps keep their encodings as delivered, sub-slices of body: ingest
// reads a few fields and stores the rest untouched. A body the fast scanner
// does not take (keys in another case or escaped, a key twice, escapes in
// the fields ingest reads, other top-level keys…) is decoded as
// encoding/json decodes it, with the same result, and its steps encoded
// again. An error says what in body is not a step batch.
func DecodeBatch(body []byte) ([]Raw, error) {
	if steps, ok := scanBatch(body); ok {
		return steps, nil
	}
	var b struct {
		Steps []json.RawMessage `json:"steps"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&b); err != nil {
		return nil, fmt.Errorf("decode body: %v", err)
	}
	full := make([]hindsight.Step, len(b.Steps))
	for i, r := range b.Steps {
		if err := UnmarshalCompact(r, &full[i]); err != nil {
			return nil, fmt.Errorf("decode body: step %d: %v", i, err)
		}
	}
	steps, err := EncodeSteps(full)
	if err != nil {
		return nil, fmt.Errorf("encode steps: %v", err)
	}
	return steps, nil
}

// scanBatch is DecodeBatch's fast path, one pass over body: it
// reports false for a body it does not take, which the general path then
// decodes (and refuses, if it is not valid).
func scanBatch(body []byte) ([]Raw, bool) {
	sc := scanner{b: body}
	sc.ws()
	if !sc.byte('{') {
		return nil, false
	}
	sc.ws()
	k, plain, ok := sc.str()
	if !ok || !plain || string(k) != "steps" {
		return nil, false
	}
	sc.ws()
	if !sc.byte(':') {
		return nil, false
	}
	sc.ws()
	var steps []Raw
	switch {
	case sc.lit("null"):
	case sc.byte('['):
		// A step is a KiB or more, most often: room for a body's steps
		// without growing, up to 64, and not much more.
		steps = make([]Raw, 0, min(64, 1+len(body)/768))
		sc.ws()
		if !sc.byte(']') {
			for {
				start := sc.i
				m, ok := sc.step()
				if !ok {
					return nil, false
				}
				steps = append(steps, Raw{Meta: m, JSON: body[start:sc.i:sc.i], Src: body, Off: start})
				sc.ws()
				if sc.byte(']') {
					break
				}
				if !sc.byte(',') {
					return nil, false
				}
				sc.ws()
			}
		}
	default:
		return nil, false
	}
	sc.ws()
	if !sc.byte('}') {
		return nil, false
	}
	sc.ws()
	return steps, sc.i == len(sc.b)
}

// scanStep is scanBatch for one step's JSON.
func scanStep(raw []byte) (Meta, bool) {
	sc := scanner{b: raw}
	sc.ws()
	m, ok := sc.step()
	sc.ws()
	return m, ok && sc.i == len(sc.b)
}

// ErrBadValue is EachValue's error for what is not a list of values.
var ErrBadValue = errors.New("bad value")

// EachValue calls fn with each JSON value of b, a list of values separated
// by commas (a stored chunk of steps), nested up to encoding/json's depth.
// Its error for a bad value wraps ErrBadValue and says the byte where it
// found it; fn's errors are returned as they are.
func EachValue(b []byte, fn func(raw []byte) error) error {
	sc := scanner{b: b, depth: MaxNesting + 1} // what encoding/json accepts
	sc.ws()
	for {
		start := sc.i
		if !sc.skip(1) {
			return fmt.Errorf("%w at byte %d", ErrBadValue, sc.i)
		}
		if err := fn(b[start:sc.i]); err != nil {
			return err
		}
		sc.ws()
		if sc.i == len(b) {
			return nil
		}
		if !sc.byte(',') {
			return fmt.Errorf("%w at byte %d", ErrBadValue, sc.i)
		}
		sc.ws()
	}
}
