package traces

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/hindsight-proxy/hindsight/wire"
)

// appendJSON appends r encoded as json.Marshal encodes it, byte for byte,
// without reflection: ingest writes the records of a batch's tasks with
// every batch.
func (r *taskRec) appendJSON(b []byte) ([]byte, error) {
	if len(r.Steps) > 0 { // never stored so; here for completeness
		j, err := json.Marshal(r)
		return append(b, j...), err
	}
	var err error
	b = wire.AppendString(append(b, `{"id":`...), r.ID)
	if b, err = wire.AppendTime(append(b, `,"started_at":`...), r.StartedAt); err != nil {
		return nil, err
	}
	if b, err = wire.AppendTime(append(b, `,"ended_at":`...), r.EndedAt); err != nil {
		return nil, err
	}
	b = strconv.AppendBool(append(b, `,"final":`...), r.Final)
	b = append(b, `,"servers":`...)
	if r.Servers == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range r.Servers {
			if i > 0 {
				b = append(b, ',')
			}
			b = wire.AppendString(b, s)
		}
		b = append(b, ']')
	}
	b = strconv.AppendInt(append(b, `,"step_count":`...), int64(r.StepCount), 10)
	b = strconv.AppendInt(append(b, `,"failure_count":`...), int64(r.FailureCount), 10)
	if r.Reflection != "" {
		b = wire.AppendString(append(b, `,"reflection":`...), r.Reflection)
	}
	b = wire.AppendString(append(b, `,"group":`...), r.Group)
	if b, err = wire.AppendTime(append(b, `,"last_at":`...), r.LastAt); err != nil {
		return nil, err
	}
	if b, err = wire.AppendTime(append(b, `,"ingested_at":`...), r.IngestedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"sessions":`...)
	switch {
	case r.Sessions == nil:
		b = append(b, "null"...)
	case len(r.Sessions) == 1: // most tasks: no keys to sort
		b = append(b, '{')
		for k, v := range r.Sessions {
			b = strconv.AppendBool(append(wire.AppendString(b, k), ':'), v)
		}
		b = append(b, '}')
	default:
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(r.Sessions)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendBool(append(wire.AppendString(b, k), ':'), r.Sessions[k])
		}
		b = append(b, '}')
	}
	if !r.FinalAt.IsZero() {
		if b, err = wire.AppendTime(append(b, `,"final_at":`...), r.FinalAt); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}
