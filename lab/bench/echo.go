//go:build linux

// Package bench measures what the sidecar costs an agent: a stdio tools/call
// round trip direct to a server, through a plain byte relay (the floor) and
// through `hindsight wrap`, with real processes on real pipes.
//
// It holds the three parts the driver (lab/bench/cmd/relaybench) and the Go
// benchmarks share: a minimal echo MCP server (ServeEcho), a plain byte
// relay (Relay), and a client that keeps many calls in flight on one
// process's stdio (Client, Run).
package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tidwall/gjson"
)

// EchoTool is the name of the echo server's only tool.
const EchoTool = "echo"

// echoProtocol is the protocol version the echo server answers with when
// the client does not name one.
const echoProtocol = "2025-11-25"

const echoToolsList = `{"tools":[{"name":"echo","description":"Returns its arguments as text.",` +
	`"inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}`

// ServeEcho runs a minimal MCP server over newline-delimited JSON-RPC: it
// answers initialize (and server/discover), ping, tools/list, and tools/call
// of the "echo" tool, whose result is one text item holding the call's
// arguments as JSON. Notifications are ignored; other methods get
// "method not found".
//
// Requests are answered in the order they arrive, without waiting for
// earlier ones, so any number may be in flight. Output is flushed whenever
// no more input is already buffered, which keeps one write per burst under
// load and one write per request when idle. ServeEcho returns nil when r
// reaches EOF.
//
// It is written by hand, without an SDK, so that a benchmark measures the
// path to the server and not the server.
func ServeEcho(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line = append(line, chunk...)
			continue
		}
		if line != nil {
			chunk = append(line, chunk...)
			line = nil
		}
		if len(chunk) > 0 {
			if resp := echoReply(chunk); resp != nil {
				bw.Write(resp)
				bw.WriteByte('\n')
			}
		}
		if err != nil {
			if ferr := bw.Flush(); ferr != nil {
				return fmt.Errorf("write response: %w", ferr)
			}
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("read request: %w", err)
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("write response: %w", err)
			}
		}
	}
}

// echoReply returns the response to one message, or nil when it needs none.
func echoReply(msg []byte) []byte {
	if len(msg) == 0 || (len(msg) == 1 && msg[0] == '\n') {
		return nil
	}
	if !gjson.ValidBytes(msg) {
		return errorReply("null", -32700, "Parse error")
	}
	f := gjson.GetManyBytes(msg, "id", "method", "params.arguments", "params.name", "params.protocolVersion")
	id, method := f[0], f[1]
	if !id.Exists() || !method.Exists() {
		return nil // a notification or a response: nothing to say
	}
	switch method.Str {
	case "initialize", "server/discover":
		proto := f[4].Str
		if proto == "" {
			proto = echoProtocol
		}
		p, _ := json.Marshal(proto)
		return resultReply(id.Raw, `{"protocolVersion":`+string(p)+
			`,"capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1.0.0"}}`)
	case "ping":
		return resultReply(id.Raw, `{}`)
	case "tools/list":
		return resultReply(id.Raw, echoToolsList)
	case "tools/call":
		if f[3].Str != EchoTool {
			return errorReply(id.Raw, -32602, "unknown tool: "+f[3].Str)
		}
		args := f[2].Raw
		if args == "" {
			args = "{}"
		}
		text, _ := json.Marshal(args)
		return resultReply(id.Raw, `{"content":[{"type":"text","text":`+string(text)+`}]}`)
	default:
		return errorReply(id.Raw, -32601, "Method not found: "+method.Str)
	}
}

func resultReply(id, result string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`)
}

func errorReply(id string, code int, message string) []byte {
	m, _ := json.Marshal(message)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, code, m)
}
