package traces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/hindsight-proxy/hindsight/wire"
)

// IngestResult says what became of a batch.
type IngestResult struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
	// Closed counts the sessions whose close waited for a step of the
	// batch (see Store.CloseSession): their tasks may be final now.
	Closed int `json:"-"`
}

// AppendJSON appends r's JSON as encoding/json's Encoder writes it, with
// its newline, without reflection: it answers every step batch.
func (r IngestResult) AppendJSON(b []byte) []byte {
	b = strconv.AppendInt(append(b, `{"accepted":`...), int64(r.Accepted), 10)
	b = strconv.AppendInt(append(b, `,"duplicates":`...), int64(r.Duplicates), 10)
	return append(b, "}\n"...)
}

// Deliver ingests steps; it lets the daemon drain orphaned outboxes into
// its own store (spool.Deliverer).
func (t *Store) Deliver(ctx context.Context, steps []hindsight.Step) error {
	_, err := t.Ingest(ctx, steps)
	return err
}

// DeliverRaw is Deliver for steps each encoded as JSON (of a
// hindsight.Step), as an outbox stores them (spool.RawDeliverer): they
// are stored as they are.
func (t *Store) DeliverRaw(ctx context.Context, steps []json.RawMessage) error {
	_, err := t.IngestRaw(ctx, steps)
	return err
}

// validateSteps reports the first step a store cannot accept.
func validateSteps(steps []hindsight.Step) error {
	for i := range steps {
		if err := validateStep(i, steps[i].Source); err != nil {
			return err
		}
	}
	return nil
}

func validateStep(i int, source string) error {
	if source == "" {
		return fmt.Errorf("step %d: no source", i)
	}
	if !ValidID(source) {
		return fmt.Errorf("step %d: source %q is not a valid id", i, source)
	}
	return nil
}

func validateRaw(steps []wire.Raw) error {
	for i := range steps {
		if err := validateStep(i, steps[i].Source); err != nil {
			return err
		}
	}
	return nil
}

// ValidID reports whether s can name a task, a source or a session: the
// key layout holds it, and it carries no control or format character
// (guard.Key): an id a client chose is printed by the command line.
func ValidID(s string) bool {
	return s != "" && len(s) <= 256 && !strings.ContainsAny(s, "\x00/") && guard.Key(s) == s
}

// Ingest stores steps, assigning each a task and a step index. Steps seen
// before (same Source and Seq) are skipped, so a batch delivered again is
// stored once. A batch is stored in one transaction, or, when too large
// for one, in consecutive parts; a failure leaves whole parts stored, and
// a redelivery completes the batch.
func (t *Store) Ingest(ctx context.Context, steps []hindsight.Step) (IngestResult, error) {
	if err := validateSteps(steps); err != nil {
		return IngestResult{}, fmt.Errorf("validate steps: %w: %w", ErrRejected, err)
	}
	raws, err := wire.EncodeSteps(steps)
	if err != nil {
		return IngestResult{}, fmt.Errorf("validate steps: %w: %w", ErrRejected, err)
	}
	return t.ingestRaw(ctx, raws)
}

// IngestRaw is Ingest for steps each encoded as JSON (of a
// hindsight.Step). What decodes is stored as it was encoded; a step that
// does not decode is refused with an error wrapping ErrRejected.
func (t *Store) IngestRaw(ctx context.Context, steps []json.RawMessage) (IngestResult, error) {
	raws, err := wire.DecodeRaws(steps)
	if err != nil {
		return IngestResult{}, fmt.Errorf("decode steps: %w: %w", ErrRejected, err)
	}
	if err := validateRaw(raws); err != nil {
		return IngestResult{}, fmt.Errorf("validate steps: %w: %w", ErrRejected, err)
	}
	return t.ingestRaw(ctx, raws)
}

// ingestRaw is Ingest for validated steps.
func (t *Store) ingestRaw(ctx context.Context, steps []wire.Raw) (IngestResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ingest(ctx, steps)
}

// ingest stores steps in one transaction, or halves them when they do not
// fit in one. t.mu is held.
func (t *Store) ingest(ctx context.Context, steps []wire.Raw) (IngestResult, error) {
	res, err := t.ingestOnce(ctx, steps)
	if !errors.Is(err, badger.ErrTxnTooBig) || len(steps) < 2 {
		return res, err
	}
	h := len(steps) / 2
	a, err := t.ingest(ctx, steps[:h])
	if err != nil {
		return a, err
	}
	b, err := t.ingest(ctx, steps[h:])
	return IngestResult{Accepted: a.Accepted + b.Accepted, Duplicates: a.Duplicates + b.Duplicates, Closed: a.Closed + b.Closed}, err
}

func (t *Store) ingestOnce(ctx context.Context, steps []wire.Raw) (IngestResult, error) {
	var res IngestResult
	w := t.newIngestTxn()
	defer w.txn.Discard()
	for i := range steps {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return IngestResult{}, err
			}
		}
		s := &steps[i]
		dup, err := w.add(s)
		if err != nil {
			return IngestResult{}, fmt.Errorf("ingest step %s/%d: %w", s.Source, s.Seq, err)
		}
		if dup {
			res.Duplicates++
		} else {
			res.Accepted++
		}
	}
	if err := w.commit(); err != nil {
		return IngestResult{}, fmt.Errorf("commit steps: %w", err)
	}
	res.Closed = w.closed
	return res, nil
}
