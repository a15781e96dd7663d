package wire

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"

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
	if math.IsNaN(s.LatencyMS) || math.IsInf(s.LatencyMS, 0) {
		return b, errors.New("encode step: latency is not a number")
	}
	for _, t := range [...]time.Time{s.StartedAt, s.EndedAt} {
		if y := t.Year(); y < 0 || y > 9999 {
			return b, errors.New("encode step: year outside of range [0,9999]")
		}
	}
	b = slices.Grow(b, sizeHint(s))
	b = append(b, `{"task_id":`...)
	b = AppendString(b, s.TaskID)
	b = append(b, `,"session_id":`...)
	b = AppendString(b, s.SessionID)
	b = append(b, `,"server":`...)
	b = AppendString(b, s.Server)
	b = append(b, `,"step_index":`...)
	b = strconv.AppendInt(b, int64(s.StepIndex), 10)
	b = append(b, `,"started_at":"`...)
	b = s.StartedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","ended_at":"`...)
	b = s.EndedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","latency_ms":`...)
	b = appendFloat(b, s.LatencyMS)
	b = append(b, `,"direction":`...)
	b = AppendString(b, string(s.Direction))
	b = append(b, `,"method":`...)
	b = AppendString(b, s.Method)
	if s.Tool != "" {
		b = append(b, `,"tool":`...)
		b = AppendString(b, s.Tool)
	}
	b = appendRaw(b, `,"arguments":`, s.Arguments)
	b = appendRaw(b, `,"result":`, s.Result)
	b = append(b, `,"is_error":`...)
	b = strconv.AppendBool(b, s.IsError)
	if e := s.Error; e != nil {
		b = append(b, `,"error":{"code":`...)
		b = strconv.AppendInt(b, int64(e.Code), 10)
		b = append(b, `,"message":`...)
		b = AppendString(b, e.Message)
		b = appendRaw(b, `,"data":`, e.Data)
		b = append(b, '}')
	}
	if s.ErrorCode != "" {
		b = append(b, `,"error_code":`...)
		b = AppendString(b, s.ErrorCode)
	}
	b = append(b, `,"causal_tag":`...)
	b = AppendString(b, string(s.CausalTag))
	b = append(b, `,"redactions":`...)
	b = strconv.AppendInt(b, int64(s.Redactions), 10)
	if len(s.Injected) > 0 {
		b = append(b, `,"injected":[`...)
		for i, in := range s.Injected {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"channel":`...)
			b = AppendString(b, in.Channel)
			if len(in.ExperienceIDs) > 0 {
				b = append(b, `,"experience_ids":[`...)
				for j, id := range in.ExperienceIDs {
					if j > 0 {
						b = append(b, ',')
					}
					b = AppendString(b, id)
				}
				b = append(b, ']')
			}
			b = append(b, `,"tokens":`...)
			b = strconv.AppendInt(b, int64(in.Tokens), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"notifications":`...)
	b = strconv.AppendInt(b, int64(s.Notifications), 10)
	if len(s.Truncated) > 0 {
		b = append(b, `,"truncated":[`...)
		for i, t := range s.Truncated {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"field":`...)
			b = AppendString(b, t.Field)
			b = append(b, `,"original_size":`...)
			b = strconv.AppendInt(b, int64(t.OriginalSize), 10)
			b = append(b, `,"sha256":`...)
			b = AppendString(b, t.SHA256)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if s.Local {
		b = append(b, `,"local":true`...)
	}
	b = appendOpt(b, `,"client_name":`, s.ClientName)
	b = appendOpt(b, `,"client_version":`, s.ClientVersion)
	b = appendOpt(b, `,"protocol_version":`, s.ProtocolVersion)
	b = appendRaw(b, `,"request":`, s.Request)
	b = appendRaw(b, `,"response":`, s.Response)
	b = appendOpt(b, `,"explicit_task":`, s.ExplicitTask)
	if s.HostPID != 0 {
		b = append(b, `,"host_pid":`...)
		b = strconv.AppendInt(b, int64(s.HostPID), 10)
	}
	b = appendOpt(b, `,"transport":`, s.Transport)
	b = append(b, `,"source":`...)
	b = AppendString(b, s.Source)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, s.Seq, 10)
	b = appendOpt(b, `,"error_template":`, s.ErrorTemplate)
	b = appendOpt(b, `,"namespace":`, s.Namespace)
	return append(b, '}'), nil
}

// sizeHint is about the length of s's encoding, so that AppendStep
// allocates once: the keys and numbers (~700 bytes with every optional
// key), the strings and the bodies.
func sizeHint(s *hindsight.Step) int {
	n := 768 + len(s.TaskID) + len(s.SessionID) + len(s.Server) + len(s.Direction) + len(s.Method) + len(s.Tool) +
		len(s.Arguments) + len(s.Result) + len(s.ErrorCode) + len(s.CausalTag) + len(s.ClientName) + len(s.ClientVersion) +
		len(s.ProtocolVersion) + len(s.Request) + len(s.Response) + len(s.ExplicitTask) + len(s.Transport) + len(s.Source) + len(s.ErrorTemplate) + len(s.Namespace)
	if s.Error != nil {
		n += 48 + len(s.Error.Message) + len(s.Error.Data)
	}
	for _, in := range s.Injected {
		n += 48 + len(in.Channel) + 24*len(in.ExperienceIDs)
	}
	return n + 128*len(s.Truncated)
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
