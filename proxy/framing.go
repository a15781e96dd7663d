package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/tidwall/gjson"
)

// MaxLineBytes is the default limit on one newline-delimited message. MCP
// results of tens of megabytes (file contents, images) must pass, so the
// limit is generous; it only keeps a runaway peer from exhausting memory.
const MaxLineBytes = 64 << 20

// LineTooLongError reports a line longer than the reader's limit. The line
// was read to its end and dropped; the next ReadLine continues after it.
type LineTooLongError struct {
	Limit int   // the reader's limit
	Size  int64 // bytes dropped, without the newline
	// Head is the line's first bytes (up to tooLongHead), from which the
	// message's id may still be read (see ID).
	Head []byte
}

// tooLongHead is how much of an over-long line LineTooLongError keeps.
const tooLongHead = 4 << 10

// ID returns the JSON-RPC id of the dropped message when its first bytes
// show one (a top-level "id" member that is a string or a number), so the
// request can be answered; nil otherwise (answer with a null id).
func (e *LineTooLongError) ID() json.RawMessage {
	id := gjson.GetBytes(e.Head, "id")
	if id.Type == gjson.String || id.Type == gjson.Number {
		return json.RawMessage(id.Raw)
	}
	return nil
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("message of %d bytes exceeds the limit of %d bytes; dropped", e.Size, e.Limit)
}

// LineReader reads newline-delimited JSON-RPC messages (the MCP stdio
// framing). Lines may end in "\n" or "\r\n"; the terminator is not
// returned.
type LineReader struct {
	r   *bufio.Reader
	max int
}

// NewLineReader returns a LineReader on r that accepts lines of up to max
// bytes (MaxLineBytes when max <= 0).
func NewLineReader(r io.Reader, max int) *LineReader {
	return newLineReaderSize(r, max, defaultBufSize)
}

// defaultBufSize is the buffer of a LineReader or LineWriter: a burst of
// messages moves with one system call.
const defaultBufSize = 64 << 10

// newLineReaderSize is NewLineReader with a buffer of size bytes; longer
// lines are gathered in chunks.
func newLineReaderSize(r io.Reader, max, size int) *LineReader {
	if max <= 0 {
		max = MaxLineBytes
	}
	return &LineReader{r: bufio.NewReaderSize(r, size), max: max}
}

// ReadLine returns the next line, in a slice the caller owns. A last line
// without a newline is returned before io.EOF. A line over the limit is
// skipped and reported as a *LineTooLongError; reading may continue.
//
// A line longer than the reader's buffer is gathered in chunks, then
// joined once: reading a line of S bytes allocates about 2×S (growing one
// slice by append allocated about 5×S, and the relay's peak memory for a
// 20 MiB message followed).
func (lr *LineReader) ReadLine() ([]byte, error) { return lr.read(true, true) }

// read is ReadLine. Unless owned, a line that fits the buffer is returned
// in a slice valid until the next read. Unless skip, a line over the
// limit is not read to its end (the *LineTooLongError's Size is what was
// read of it), for a reader that gives up on the stream.
func (lr *LineReader) read(owned, skip bool) ([]byte, error) {
	var long gathered // a line longer than the bufio buffer
	for {
		frag, err := lr.r.ReadSlice('\n')
		n := long.n + len(frag)
		if err == nil {
			n-- // the newline
		}
		if n > lr.max {
			head := frag
			if long.n > 0 {
				head = long.chunks[0]
			}
			head = bytes.Clone(head[:min(len(head), tooLongHead)])
			if !skip {
				return nil, &LineTooLongError{Limit: lr.max, Size: int64(long.n + len(frag)), Head: head}
			}
			return nil, lr.skip(head, int64(long.n+len(frag)), err)
		}
		switch {
		case err == nil || errors.Is(err, io.EOF) && n > 0:
			if err == nil {
				frag = frag[:len(frag)-1]
			}
			switch {
			case long.n > 0:
				return long.join(frag), nil
			case owned:
				return lr.own(frag), nil
			}
			return frag, nil
		case errors.Is(err, bufio.ErrBufferFull):
			long.add(frag)
		default:
			return nil, err
		}
	}
}

// gathered holds the fragments of a long line, copied into chunks that
// double in size up to maxChunk, so the line is never copied as it grows.
type gathered struct {
	chunks [][]byte
	n      int
}

const (
	minChunk = 256 << 10
	maxChunk = 4 << 20
)

func (g *gathered) add(frag []byte) {
	g.n += len(frag)
	for len(frag) > 0 {
		if k := len(g.chunks); k == 0 || len(g.chunks[k-1]) == cap(g.chunks[k-1]) {
			g.chunks = append(g.chunks, make([]byte, 0, min(max(minChunk, g.n-len(frag)), maxChunk)))
		}
		c := &g.chunks[len(g.chunks)-1]
		m := min(len(frag), cap(*c)-len(*c))
		*c = append(*c, frag[:m]...)
		frag = frag[m:]
	}
}

// collectAfter is the size of line after whose joining ReadLine runs a
// garbage collection: its chunks, as large as the line, are garbage, and
// the heap may otherwise grow past them (to twice what is live) before the
// runtime collects, adding them to the peak of the next large message. A
// collection of the sidecar's small heap takes about a millisecond, next
// to the tens a message this size takes to relay.
const collectAfter = 4 << 20

// join returns the gathered line followed by tail, in one allocation.
func (g *gathered) join(tail []byte) []byte {
	out := make([]byte, 0, g.n+len(tail))
	for _, c := range g.chunks {
		out = append(out, c...)
	}
	out = append(out, tail...)
	if len(out) >= collectAfter {
		g.chunks = nil
		runtime.GC()
	}
	return out
}

// own returns a copy of frag that the caller owns. Each line has an
// allocation of its own: lines are kept for unbounded times (capture's
// queue, the initialize replayed to a respawned server), and a line that
// shared a block with others would keep them all alive, so capture's bound
// on queued bytes would no longer bound memory.
func (lr *LineReader) own(frag []byte) []byte {
	line := make([]byte, len(frag))
	copy(line, frag)
	return line
}

// Pending reports whether a whole line is already buffered, so that the
// next ReadLine returns without waiting for input. A relay uses it to write
// a burst of messages with one flush: it flushes only before it would wait.
func (lr *LineReader) Pending() bool {
	n := lr.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := lr.r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// skip discards the rest of an over-long line.
func (lr *LineReader) skip(head []byte, size int64, err error) error {
	for errors.Is(err, bufio.ErrBufferFull) {
		var frag []byte
		frag, err = lr.r.ReadSlice('\n')
		size += int64(len(frag))
	}
	if err == nil {
		size-- // the newline
	}
	return &LineTooLongError{Limit: lr.max, Size: size, Head: head}
}

// LineWriter writes newline-delimited messages. Each WriteMessage writes one
// message and its newline and flushes, so a message is never split by or
// interleaved with another; it is safe for concurrent use. Buffer and Flush
// let a relay write a burst of messages with one system call. After a write
// error every later write fails with the same error.
type LineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// NewLineWriter returns a LineWriter on w.
func NewLineWriter(w io.Writer) *LineWriter {
	return newLineWriterSize(w, defaultBufSize)
}

// newLineWriterSize is NewLineWriter with a buffer of size bytes; a longer
// message goes straight through.
func newLineWriterSize(w io.Writer, size int) *LineWriter {
	return &LineWriter{w: bufio.NewWriterSize(w, size)}
}

// WriteMessage writes msg followed by a newline and flushes. msg must not
// contain a newline (compact JSON never does).
func (lw *LineWriter) WriteMessage(msg []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.w.Write(msg) // a large msg goes straight through; errors stick
	lw.w.WriteByte('\n')
	return lw.w.Flush()
}

// Buffer writes msg followed by a newline without flushing, unless the
// buffer fills. The caller must call Flush (or WriteMessage) before it
// waits for anything, or the message may sit in the buffer.
func (lw *LineWriter) Buffer(msg []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.w.Write(msg)
	return lw.w.WriteByte('\n')
}

// Flush writes out buffered messages.
func (lw *LineWriter) Flush() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Flush()
}
