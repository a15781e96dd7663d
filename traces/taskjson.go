package traces

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"
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
	b = appendJSONString(append(b, `{"id":`...), r.ID)
	if b, err = appendJSONTime(append(b, `,"started_at":`...), r.StartedAt); err != nil {
		return nil, err
	}
	if b, err = appendJSONTime(append(b, `,"ended_at":`...), r.EndedAt); err != nil {
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
			b = appendJSONString(b, s)
		}
		b = append(b, ']')
	}
	b = strconv.AppendInt(append(b, `,"step_count":`...), int64(r.StepCount), 10)
	b = strconv.AppendInt(append(b, `,"failure_count":`...), int64(r.FailureCount), 10)
	if r.Reflection != "" {
		b = appendJSONString(append(b, `,"reflection":`...), r.Reflection)
	}
	b = appendJSONString(append(b, `,"group":`...), r.Group)
	if b, err = appendJSONTime(append(b, `,"last_at":`...), r.LastAt); err != nil {
		return nil, err
	}
	if b, err = appendJSONTime(append(b, `,"ingested_at":`...), r.IngestedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"sessions":`...)
	switch {
	case r.Sessions == nil:
		b = append(b, "null"...)
	case len(r.Sessions) == 1: // most tasks: no keys to sort
		b = append(b, '{')
		for k, v := range r.Sessions {
			b = strconv.AppendBool(append(appendJSONString(b, k), ':'), v)
		}
		b = append(b, '}')
	default:
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(r.Sessions)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendBool(append(appendJSONString(b, k), ':'), r.Sessions[k])
		}
		b = append(b, '}')
	}
	if !r.FinalAt.IsZero() {
		if b, err = appendJSONTime(append(b, `,"final_at":`...), r.FinalAt); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendJSONTime appends t as json.Marshal encodes it (time.Time's
// MarshalJSON), with its error for a time it cannot encode.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	b, err := t.AppendText(append(b, '"'))
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

// appendJSONString appends s as json.Marshal encodes it: quoted, with
// json.Marshal itself for any string that needs an escape (HTML
// characters included) or is not ASCII.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s) // a string always encodes
			return append(b, j...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}
