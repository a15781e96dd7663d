package traces

import (
	"context"

	"github.com/hindsight-proxy/hindsight/wire"
)

// Batch is a step batch decoded for ingest: each step's JSON as it was
// delivered, with what ingest reads of it.
type Batch struct{ steps []wire.Raw }

// DecodeBatch decodes the body of a step batch ({"steps": [...]}, each
// step whole or compact); an error wraps ErrBadRequest. The steps may be
// views of body, which must not change until the batch is ingested.
func DecodeBatch(body []byte) (Batch, error) {
	steps, err := wire.DecodeBatch(body)
	if err != nil {
		return Batch{}, badRequest("%v", err)
	}
	return Batch{steps}, nil
}

// Len is the number of steps in b.
func (b Batch) Len() int { return len(b.steps) }

// Size is the total size of b's steps' JSON.
func (b Batch) Size() int64 {
	var n int64
	for _, st := range b.steps {
		n += int64(len(st.JSON))
	}
	return n
}

// Validate reports the first step of b that a store cannot accept.
func (b Batch) Validate() error { return validateRaw(b.steps) }

// IngestBatch is Ingest for a decoded batch that passed Validate.
func (t *Store) IngestBatch(ctx context.Context, b Batch) (IngestResult, error) {
	return t.ingestRaw(ctx, b.steps)
}
