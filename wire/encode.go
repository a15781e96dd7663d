package wire

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/hindsight-proxy/hindsight"
)

// AppendStep appends the JSON encoding of s to b: the same fields, names
// and order as json.Marshal's (stepKeys lists them; the ingest scanner
// reads them fastest in that order), but the json.RawMessage fields (the bodies)
// are copied as they are instead of being scanned and compacted again,
// which is most of the cost of encoding a step. So the bodies must be
// valid JSON, as they are in a Step decoded from JSON or built by capture
// from bodies the redactor parsed; their whitespace is kept.
func AppendStep(b []byte, s *hindsight.Step) ([]byte, error) {
	if err := checkStep(s); err != nil {
		return b, err
	}
	b = slices.Grow(b, sizeHint(s))
	return appendStepMembers(b, s), nil
}

// sizeHint is about the length of s's encoding, so that AppendStep
// allocates once: the keys and numbers (~700 bytes with every optional
// key), the strings and the bodies.
func sizeHint(s *hindsight.Step) int {
	n := 768 + stepTextSize(s)
	if s.Error != nil {
		n += 48 + len(s.Error.Message) + len(s.Error.Data)
	}
	for _, in := range s.Injected {
		n += 48 + len(in.Channel) + 24*len(in.ExperienceIDs)
	}
	return n + 128*len(s.Truncated)
}

// appendRPCError appends an error member with its key.
func appendRPCError(b []byte, key string, e *hindsight.RPCError) []byte {
	b = append(append(b, key...), `{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = AppendString(b, e.Message)
	b = appendRaw(b, `,"data":`, e.Data)
	return append(b, '}')
}

// appendInjected appends an injected member with its key.
func appendInjected(b []byte, key string, injected []hindsight.Injection) []byte {
	return appendList(b, key, injected, func(b []byte, in hindsight.Injection) []byte {
		b = append(b, `{"channel":`...)
		b = AppendString(b, in.Channel)
		if len(in.ExperienceIDs) > 0 {
			b = appendList(b, `,"experience_ids":`, in.ExperienceIDs, AppendString)
		}
		b = append(b, `,"tokens":`...)
		b = strconv.AppendInt(b, int64(in.Tokens), 10)
		return append(b, '}')
	})
}

// appendTruncated appends a truncated member with its key.
func appendTruncated(b []byte, key string, truncated []hindsight.Truncation) []byte {
	return appendList(b, key, truncated, func(b []byte, t hindsight.Truncation) []byte {
		b = append(b, `{"field":`...)
		b = AppendString(b, t.Field)
		b = append(b, `,"original_size":`...)
		b = strconv.AppendInt(b, int64(t.OriginalSize), 10)
		b = append(b, `,"sha256":`...)
		b = AppendString(b, t.SHA256)
		return append(b, '}')
	})
}

// appendList appends key and the JSON array of xs, each appended by one.
func appendList[T any](b []byte, key string, xs []T, one func([]byte, T) []byte) []byte {
	b = append(append(b, key...), '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = one(b, x)
	}
	return append(b, ']')
}

// appendRaw appends an omitempty json.RawMessage field with its key.
func appendRaw(b []byte, key string, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return b
	}
	return append(append(b, key...), raw...)
}

// appendOpt appends an omitempty string field with its key.
func appendOpt(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return AppendString(append(b, key...), s)
}

// appendFloat appends f as encoding/json does.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
