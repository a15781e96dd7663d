package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/wire"
	"github.com/tidwall/gjson"
)

// DefaultMaxBodyBytes is the size above which a stored body (arguments,
// result, request, response) is truncated when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 64 << 10

// TaskMetaKey is the _meta member of a request that names its task
// explicitly; it wins over HINDSIGHT_TASK_ID.
const TaskMetaKey = "io.hindsight/task"

// oversize is how many times MaxBodyBytes a body may be and still be
// redacted whole. A larger body is cut to MaxBodyBytes first and only the
// kept part is redacted (as text), so one huge result cannot stall capture;
// its Truncation then hashes the bytes as relayed, since the redacted whole
// was never computed.
const oversize = 16

// BuildStep turns one relayed exchange into a step: the request and
// response are redacted, bodies over maxBody bytes are truncated, and the
// error code and a causal tag are derived. The tag is the step's own
// outcome (success, failure, timeout, cancelled); a Tagger refines it with
// the session's history (recovery, retry). Source and Seq are left for the
// outbox to assign.
func BuildStep(ex *proxy.Exchange, r *Redactor, maxBody int) hindsight.Step {
	var s hindsight.Step
	buildStep(&s, ex, r, maxBody)
	return s
}

// buildStep is BuildStep building into s, which it overwrites.
func buildStep(s *hindsight.Step, ex *proxy.Exchange, r *Redactor, maxBody int) {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	*s = hindsight.Step{
		Direction:     ex.Direction,
		Method:        ex.Method,
		StartedAt:     ex.Started,
		EndedAt:       ex.Ended,
		Notifications: ex.Notifications,
		Local:         ex.Local,
		Injected:      ex.Injected,
	}
	if !ex.Ended.IsZero() && !ex.Started.IsZero() {
		s.LatencyMS = float64(ex.Ended.Sub(ex.Started).Microseconds()) / 1000
	}
	if sess := ex.Session; sess != nil {
		// The session's names come from the command line and the
		// environment: a secret in them is redacted like one in a body.
		s.SessionID, s.Server, s.Transport, s.HostPID, s.ExplicitTask = sess.ID, r.RedactName(sess.Server), sess.Transport, sess.HostPID, r.RedactName(sess.TaskID)
		s.ClientName, s.ClientVersion, s.ProtocolVersion = sess.Client()
	}

	req, nreq, reqCut := redactBody(r, ex.Request, maxBody)
	resp, nresp, respCut := redactBody(r, ex.Response, maxBody)
	// Invalid UTF-8 (inside JSON strings: the relay checked the rest) is
	// relayed as it came, but stored replaced, so that the daemon's API,
	// exports and --json output are valid UTF-8 JSON; each replaced run
	// counts as a redaction.
	req, breq := validUTF8(req)
	resp, bresp := validUTF8(resp)
	s.Redactions = nreq + nresp + breq + bresp

	// The step keeps req and resp, so its arguments and result are slices
	// of them; strings are copied out.
	if reqCut == nil {
		f := readRequest(req, ex.Method)
		s.Arguments, s.Tool = f.args, f.tool
		if f.task != "" {
			s.ExplicitTask = f.task
		}
	} else if ex.Method == "tools/call" {
		s.Tool = gjson.GetBytes(ex.Request, "params.name").String() // a tool name is no secret
		if n, _ := r.RedactString(s.Tool); n != s.Tool {
			s.Tool = n
		}
	}
	if respCut == nil && len(resp) > 0 {
		f := readResponse(resp)
		s.Result, s.IsError, s.Error = f.result, f.isError, f.err
	} else if respCut != nil {
		// The response was too large to redact whole: keep what can be
		// known safely from the bytes as relayed.
		s.IsError = gjson.GetBytes(ex.Response, "result.isError").Bool()
		if e := gjson.GetBytes(ex.Response, "error"); e.IsObject() {
			msg, _ := r.RedactString(e.Get("message").String())
			s.Error = &hindsight.RPCError{Code: int(e.Get("code").Int()), Message: msg}
		}
	}

	// Names become keys and are printed: what a client or server put in
	// them may not carry control characters.
	s.Server, s.Tool = guard.Key(s.Server), guard.Key(s.Tool)
	s.ErrorCode = errorCode(s, ex.Failure)
	s.CausalTag = baseTag(s, ex)

	s.Request, s.Arguments = truncateField(s, "request", req, reqCut, maxBody), truncateField(s, "arguments", s.Arguments, nil, maxBody)
	s.Response, s.Result = truncateField(s, "response", resp, respCut, maxBody), truncateField(s, "result", s.Result, nil, maxBody)
	if s.Error != nil && (len(s.Error.Data) > maxBody || tooDeep(s.Error.Data, MaxBodyDepth)) {
		s.Error.Data = preview(s.Error.Data, maxBody)
	}
}

// taskMetaKeyPath is the gjson path of TaskMetaKey in _meta.
var taskMetaKeyPath = gjsonEscape(TaskMetaKey)

func gjsonEscape(path string) string {
	return strings.NewReplacer(".", `\.`, "*", `\*`, "?", `\?`).Replace(path)
}

// redactBody redacts raw. A body larger than oversize×maxBody is cut first;
// the returned Truncation then describes the original.
func redactBody(r *Redactor, raw []byte, maxBody int) ([]byte, int, *hindsight.Truncation) {
	if len(raw) == 0 {
		return nil, 0, nil
	}
	if len(raw) <= oversize*maxBody {
		out, n := r.Redact(raw)
		return out, n, nil
	}
	sum := sha256.Sum256(raw)
	text, n := r.RedactString(validPrefix(raw, maxBody))
	return wire.AppendPlainString(nil, text+"…"), n, &hindsight.Truncation{OriginalSize: len(raw), SHA256: hex.EncodeToString(sum[:])}
}

// truncateField returns body, or a JSON string holding its first maxBody
// bytes when it is longer, and notes the truncation on s.
func truncateField(s *hindsight.Step, field string, body []byte, cut *hindsight.Truncation, maxBody int) json.RawMessage {
	if cut != nil {
		t := *cut
		t.Field = field
		s.Truncated = append(s.Truncated, t)
		return body
	}
	if len(body) <= maxBody && !tooDeep(body, MaxBodyDepth) {
		return body
	}
	sum := sha256.Sum256(body)
	s.Truncated = append(s.Truncated, hindsight.Truncation{Field: field, OriginalSize: len(body), SHA256: hex.EncodeToString(sum[:])})
	return preview(body, maxBody)
}

// validUTF8 returns b with each run of invalid UTF-8 replaced by U+FFFD, and
// how many runs it replaced; b itself when it is valid (b is not modified).
func validUTF8(b []byte) ([]byte, int) {
	if utf8.Valid(b) {
		return b, 0
	}
	n := 0
	for i, bad := 0, false; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		invalid := r == utf8.RuneError && size == 1
		if invalid && !bad {
			n++
		}
		bad = invalid
		i += size
	}
	return bytes.ToValidUTF8(b, []byte("\uFFFD")), n
}

// MaxBodyDepth is the deepest nesting of arrays and objects a stored body
// keeps: a deeper one is stored truncated (a JSON string of its first
// bytes, with its size and SHA-256), as an over-long one is. The relay
// passes any depth; the daemon and the tools that read steps decode them
// with encoding/json, which stops at 10,000 levels, and a step nests its
// bodies a few levels down.
const MaxBodyDepth = 1000

// tooDeep reports whether the JSON in b nests arrays and objects more than
// limit deep. Bodies too short or with too few brackets to do so are not
// scanned.
func tooDeep(b []byte, limit int) bool {
	if len(b) <= 2*limit || bytes.Count(b, []byte{'{'})+bytes.Count(b, []byte{'['}) <= limit {
		return false
	}
	depth, inStr := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			if depth++; depth > limit {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

// preview is the first max bytes of b (cut at a rune boundary) as a JSON
// string, so a truncated body is still valid JSON.
func preview(b []byte, max int) json.RawMessage {
	return wire.AppendPlainString(nil, validPrefix(b, max)+"…")
}

func validPrefix(b []byte, max int) string {
	if len(b) > max {
		b = b[:max]
		// Drop a rune cut in half rather than turn it into U+FFFD.
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.FullRune(b[lastRuneStart(b):]); i++ {
			b = b[:lastRuneStart(b)]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func lastRuneStart(b []byte) int {
	i := len(b) - 1
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return i
}

// Error codes. A step's ErrorCode is the most specific of, in order:
//
//	http-NNN        an HTTP status 4xx/5xx named in the error text
//	                ("HTTP 404", "status code: 429", "503 Service Unavailable")
//	errno-NAME      an errno name or its usual wording ("ENOENT", "EACCES",
//	                "connection refused" → errno-ECONNREFUSED)
//	timeout         "timed out", "timeout", "deadline exceeded"
//	jsonrpc-N       the JSON-RPC error code when nothing above matched
//	                (-32602 → "jsonrpc-32602")
//	transport       the sidecar ended the request itself (the server exited)
//
// The text searched is the JSON-RPC error's message and data, or for an
// isError result its text content and structuredContent. Successful steps
// have no code.
var (
	httpStatusRe = regexp.MustCompile(`(?i)\b(?:https?(?:/[\d.]+)?|status(?:[ _-]?code)?|response[ _-]?code|error|code)["']?\s*[:=]?\s*\(?([45]\d\d)\b`)
	httpReasonRe = regexp.MustCompile(`(?i)\b([45]\d\d)[ -]+(?:bad request|unauthori[sz]ed|payment required|forbidden|not found|method not allowed|not acceptable|request time-?out|conflict|gone|payload too large|unprocessable (?:entity|content)|too many requests|internal server error|not implemented|bad gateway|service unavailable|gateway time-?out)\b`)
	errnoRe      = regexp.MustCompile(`\b(E(?:NOENT|ACCES|PERM|EXIST|NOTDIR|ISDIR|NOTEMPTY|NOSPC|ROFS|MFILE|NFILE|BUSY|INVAL|PIPE|AGAIN|CONNREFUSED|CONNRESET|CONNABORTED|HOSTUNREACH|NETUNREACH|ADDRINUSE|ADDRNOTAVAIL|TIMEDOUT|NOTFOUND|AI_AGAIN|NOTCONN|XDEV|LOOP|NAMETOOLONG|FBIG|DQUOT|NOMEM|NOSYS|NOTSUP|OPNOTSUPP|BADF|CANCELED|SHUTDOWN|PROTO))\b`)
	timeoutRe    = regexp.MustCompile(`(?i)\b(?:timed? ?out|time-out|timeout|deadline exceeded)\b`)
	errnoWords   = []struct{ phrase, name string }{
		{"no such file or directory", "ENOENT"},
		{"permission denied", "EACCES"},
		{"access denied", "EACCES"},
		{"operation not permitted", "EPERM"},
		{"connection refused", "ECONNREFUSED"},
		{"connection reset", "ECONNRESET"},
		{"file exists", "EEXIST"},
		{"already exists", "EEXIST"},
		{"not a directory", "ENOTDIR"},
		{"is a directory", "EISDIR"},
		{"directory not empty", "ENOTEMPTY"},
		{"no space left on device", "ENOSPC"},
		{"read-only file system", "EROFS"},
		{"too many open files", "EMFILE"},
		{"broken pipe", "EPIPE"},
		{"no such host", "ENOTFOUND"},
		{"network is unreachable", "ENETUNREACH"},
		{"address already in use", "EADDRINUSE"},
	}
)

// errorText is the text of a failed step that error codes are read from,
// at most 16 KiB of it.
func errorText(s *hindsight.Step) string {
	var b strings.Builder
	if s.Error != nil {
		b.WriteString(s.Error.Message)
		if len(s.Error.Data) > 0 {
			b.WriteByte('\n')
			b.Write(s.Error.Data)
		}
	}
	if s.IsError && len(s.Result) > 0 {
		res := gjson.ParseBytes(s.Result)
		res.Get("content").ForEach(func(_, item gjson.Result) bool {
			if t := item.Get("text"); t.Exists() {
				b.WriteByte('\n')
				b.WriteString(t.String())
			}
			return b.Len() < 16<<10
		})
		if sc := res.Get("structuredContent"); sc.Exists() {
			b.WriteByte('\n')
			b.WriteString(sc.Raw)
		}
	}
	t := b.String()
	if len(t) > 16<<10 {
		t = t[:16<<10]
	}
	return t
}

// ErrorCode returns the error code of a step (see the scheme above), and
// "" for a step that did not fail.
func ErrorCode(s *hindsight.Step) string { return errorCode(s, "") }

func errorCode(s *hindsight.Step, failure string) string {
	if s.Error == nil && !s.IsError {
		return ""
	}
	text := errorText(s)
	if m := httpReasonRe.FindStringSubmatch(text); m != nil {
		return "http-" + m[1]
	}
	if m := httpStatusRe.FindStringSubmatch(text); m != nil {
		return "http-" + m[1]
	}
	if m := errnoRe.FindStringSubmatch(text); m != nil {
		return "errno-" + m[1]
	}
	lower := strings.ToLower(text)
	for _, w := range errnoWords {
		if strings.Contains(lower, w.phrase) {
			return "errno-" + w.name
		}
	}
	if timeoutRe.MatchString(text) {
		return "timeout"
	}
	if failure != "" {
		return "transport"
	}
	if s.Error != nil {
		return "jsonrpc" + strconv.Itoa(s.Error.Code)
	}
	return ""
}

// timeoutCodes are the error codes that make a failed step a timeout.
var timeoutCodes = map[string]bool{"timeout": true, "errno-ETIMEDOUT": true, "http-408": true, "http-504": true}

// baseTag is a step's own outcome, before the session's history is known.
func baseTag(s *hindsight.Step, ex *proxy.Exchange) hindsight.CausalTag {
	switch {
	case ex.Cancelled:
		return hindsight.TagCancelled
	case timeoutCodes[s.ErrorCode]:
		return hindsight.TagTimeout
	case s.Error != nil || s.IsError || ex.Failure != "":
		return hindsight.TagFailure
	}
	return hindsight.TagSuccess
}

// rawIn returns r, found by gjson in body, as a slice of body (capacity
// capped, so appending to it cannot write into body), or a copy when gjson
// does not say where it is.
func rawIn(body []byte, r gjson.Result) json.RawMessage {
	if i, n := r.Index, len(r.Raw); n > 0 && i > 0 && i+n <= len(body) && unsafe.StringData(r.Raw) == &body[i] {
		return body[i : i+n : i+n]
	}
	return json.RawMessage(r.Raw)
}
