package wire

// The keys of a Step's JSON, as bits of a set.
const (
	kTaskID = iota
	kSessionID
	kServer
	kStepIndex
	kStartedAt
	kEndedAt
	kLatencyMS
	kDirection
	kMethod
	kTool
	kArguments
	kResult
	kIsError
	kError
	kErrorCode
	kCausalTag
	kRedactions
	kInjected
	kNotifications
	kTruncated
	kLocal
	kClientName
	kClientVersion
	kProtocolVersion
	kRequest
	kResponse
	kExplicitTask
	kHostPID
	kTransport
	kSource
	kSeq
	kDerived       // a compact encoding's list of the bodies it left out
	kErrorTemplate // filled by the daemon when a step is read; kept on import
	kNamespace
)

// stepKeys are the keys of a Step's JSON, quoted, in the order of the
// constants above, which is the order AppendStep writes them in. The
// scanner reads keys in any order; in this one it finds each by one
// comparison (see key), and TestStepKeys fails if the two orders part.
var stepKeys = [...]string{
	`"task_id"`, `"session_id"`, `"server"`, `"step_index"`, `"started_at"`, `"ended_at"`,
	`"latency_ms"`, `"direction"`, `"method"`, `"tool"`, `"arguments"`, `"result"`,
	`"is_error"`, `"error"`, `"error_code"`, `"causal_tag"`, `"redactions"`, `"injected"`,
	`"notifications"`, `"truncated"`, `"local"`, `"client_name"`, `"client_version"`,
	`"protocol_version"`, `"request"`, `"response"`, `"explicit_task"`, `"host_pid"`,
	`"transport"`, `"source"`, `"seq"`, `"derived"`, `"error_template"`, `"namespace"`,
}

// key consumes a key of a step's object and returns which it is. It first
// tries next, the key that follows the previous one in the order a
// sidecar writes them: a key with neither escapes nor control characters
// that is followed by its closing quote is that key, as str would read it.
// It reports false for a key that is not a Step's or has escapes.
func (sc *scanner) key(next int) (int, bool) {
	if next < len(stepKeys) {
		if k := stepKeys[next]; len(sc.b)-sc.i >= len(k) && string(sc.b[sc.i:sc.i+len(k)]) == k {
			sc.i += len(k)
			return next, true
		}
	}
	k, plain, ok := sc.str()
	if !ok || !plain {
		return 0, false
	}
	f := stepKey(StringView(k))
	return f, f >= 0
}

func stepKey(name string) int {
	switch name {
	case "task_id":
		return kTaskID
	case "session_id":
		return kSessionID
	case "server":
		return kServer
	case "step_index":
		return kStepIndex
	case "started_at":
		return kStartedAt
	case "ended_at":
		return kEndedAt
	case "latency_ms":
		return kLatencyMS
	case "direction":
		return kDirection
	case "method":
		return kMethod
	case "tool":
		return kTool
	case "arguments":
		return kArguments
	case "result":
		return kResult
	case "is_error":
		return kIsError
	case "error":
		return kError
	case "error_code":
		return kErrorCode
	case "causal_tag":
		return kCausalTag
	case "redactions":
		return kRedactions
	case "injected":
		return kInjected
	case "notifications":
		return kNotifications
	case "truncated":
		return kTruncated
	case "local":
		return kLocal
	case "client_name":
		return kClientName
	case "client_version":
		return kClientVersion
	case "protocol_version":
		return kProtocolVersion
	case "request":
		return kRequest
	case "response":
		return kResponse
	case "explicit_task":
		return kExplicitTask
	case "host_pid":
		return kHostPID
	case "transport":
		return kTransport
	case "source":
		return kSource
	case "seq":
		return kSeq
	case "derived":
		return kDerived
	case "error_template":
		return kErrorTemplate
	case "namespace":
		return kNamespace
	}
	return -1
}
