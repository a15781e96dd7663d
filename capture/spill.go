package capture

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// Spill defaults.
const (
	// DefaultMaxSpillBytes bounds the exchanges spilled to disk while
	// capture is behind; past it they are dropped (and counted).
	DefaultMaxSpillBytes = 1 << 30
	spillSegmentBytes    = 64 << 20 // a segment is deleted once read through
	// spillQueue bounds the exchanges waiting for the spill writer (in
	// count and in bytes): past it they are dropped, so Hook never waits.
	spillQueue      = 4096
	spillQueueBytes = 16 << 20
)

// A spill holds the exchanges that found the capture queue full, in the
// order they came, until the Recorder can redact them: sealed with
// AES-256-GCM under a key made at random when the spill opens and kept only
// in this process's memory, in append-only segment files (0600) under the
// outbox's spill/ directory. Unredacted data therefore reaches the disk
// only as ciphertext that nobody can open once the process is gone: a
// crash loses the spilled exchanges, and the next sidecar or the daemon
// (DrainOrphans) deletes them and counts them (SpillLost).
//
// One goroutine writes (put), one reads (next); sessions are kept in
// memory and referred to by number.
type spill struct {
	dir  string
	aead cipher.AEAD
	max  int64
	log  *slog.Logger
	c    *counters

	mu       sync.Mutex
	segs     []*segment // oldest first; the last one is being written
	lastSeg  int        // the number of the newest segment made
	bytes    int64      // on disk now
	wseq     uint64     // records written (the next record's nonce)
	rseq     uint64     // records read
	sessions []*proxy.Session
	sessIdx  map[*proxy.Session]uint64
	more     chan struct{} // a record was written
	rfile    *os.File      // the segment being read
	rd       *bufio.Reader // over rfile
	rbuf     []byte
	// wbuf holds the last wrecs records sealed, not yet written: put
	// gathers them and flush writes them at once, one write for a burst.
	wbuf  []byte
	wrecs int
	// plain and rec are put's scratch (one goroutine puts), so that
	// sealing an exchange allocates nothing once they have grown; wnonce
	// and rnonce are put's and next's nonces.
	plain, rec     []byte
	wnonce, rnonce []byte
}

// spillFlushBytes is how much put gathers before it writes;
// spillScratchMax the largest scratch buffers put keeps for the next
// exchange.
const (
	spillFlushBytes = 64 << 10
	spillScratchMax = 1 << 20
)

type segment struct {
	n       int // segment number, its file name
	w       *os.File
	records int   // written
	read    int   // read
	size    int64 // bytes
}

// openSpill makes dir (0700) and a fresh key.
func openSpill(dir string, max int64, more chan struct{}, log *slog.Logger, c *counters) (*spill, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create spill directory: %w", err)
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("make spill key: %w", err)
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, fmt.Errorf("make spill cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("make spill cipher: %w", err)
	}
	return &spill{dir: dir, aead: aead, max: max, log: log, c: c,
		sessIdx: map[*proxy.Session]uint64{}, more: more,
		wnonce: make([]byte, aead.NonceSize()), rnonce: make([]byte, aead.NonceSize())}, nil
}

// nonce sets n, a nonce of the spill's AEAD, to the one of record seq.
func nonce(n []byte, seq uint64) []byte {
	binary.BigEndian.PutUint64(n[len(n)-8:], seq)
	return n
}

func segmentName(n int) string { return fmt.Sprintf("%08d.seal", n) }

// put seals ex and adds it to the records waiting to be written (see
// flush). It writes those first when ex starts a new segment: written
// counts them. It fails when the spill is over its bound or the disk
// fails; lost counts the exchanges the failure lost, ex included.
func (s *spill) put(ex *proxy.Exchange) (written, lost int, err error) {
	s.mu.Lock()
	sess := s.sessionNumber(ex.Session)
	seq := s.wseq
	s.mu.Unlock()
	s.plain = encodeExchange(s.plain[:0], ex, sess)
	rec := append(s.rec[:0], 0, 0, 0, 0)
	rec = s.aead.Seal(rec, nonce(s.wnonce, seq), s.plain, nil)
	clear(s.plain)
	s.rec = rec
	if cap(s.plain) > spillScratchMax { // a rare huge exchange's are let go
		s.plain, s.rec = nil, nil
	}
	binary.BigEndian.PutUint32(rec, uint32(len(rec)-4))

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+int64(len(s.wbuf)+len(rec)) > s.max {
		return 0, 1, fmt.Errorf("spill full (%d bytes)", s.max)
	}
	w := s.writer()
	if w == nil || w.size+int64(len(s.wbuf)+len(rec)) > spillSegmentBytes && w.records+s.wrecs > 0 {
		written, lost, err = s.flushLocked()
		if err != nil {
			return written, lost + 1, err
		}
		if err := s.rotate(); err != nil {
			return written, 1, err
		}
	}
	s.wbuf = append(s.wbuf, rec...)
	s.wrecs++
	s.wseq++
	return written, 0, nil
}

// buffered is the size of the records waiting to be written.
func (s *spill) buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.wbuf)
}

// flush writes the records put gathered, in one write: written counts
// them, or lost when the write failed.
func (s *spill) flush() (written, lost int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

// flushLocked is flush with s.mu held.
func (s *spill) flushLocked() (written, lost int, err error) {
	if s.wrecs == 0 {
		return 0, 0, nil
	}
	n, size := s.wrecs, int64(len(s.wbuf))
	w := s.writer()
	if w == nil {
		err = errors.New("write spill: no segment")
	} else if _, err = w.w.Write(s.wbuf); err != nil {
		// A partial record would misalign the segment: start another.
		w.w.Close()
		w.w = nil
		err = fmt.Errorf("write spill: %w", err)
	}
	clear(s.wbuf)
	s.wbuf, s.wrecs = s.wbuf[:0], 0
	if err != nil {
		s.wseq -= uint64(n) // their nonces are the next records'
		return 0, n, err
	}
	w.records += n
	w.size += size
	s.bytes += size
	s.c.spillBytes.Store(s.bytes)
	select {
	case s.more <- struct{}{}:
	default:
	}
	return n, 0, nil
}

// writer is the segment being written, or nil. s.mu is held.
func (s *spill) writer() *segment {
	if len(s.segs) == 0 || s.segs[len(s.segs)-1].w == nil {
		return nil
	}
	return s.segs[len(s.segs)-1]
}

// rotate closes the segment being written and starts the next. s.mu is
// held.
func (s *spill) rotate() error {
	if len(s.segs) > 0 {
		if last := s.segs[len(s.segs)-1]; last.w != nil {
			last.w.Close()
			last.w = nil
		}
	}
	s.lastSeg++
	n := s.lastSeg
	f, err := os.OpenFile(filepath.Join(s.dir, segmentName(n)), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create spill segment: %w", err)
	}
	s.segs = append(s.segs, &segment{n: n, w: f})
	return nil
}

func (s *spill) sessionNumber(sess *proxy.Session) uint64 {
	if sess == nil {
		return 0
	}
	if i, ok := s.sessIdx[sess]; ok {
		return i
	}
	s.sessions = append(s.sessions, sess)
	s.sessIdx[sess] = uint64(len(s.sessions))
	return uint64(len(s.sessions))
}

// pending is the number of records written and not yet read.
func (s *spill) pending() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wseq - s.rseq
}

// next reads the oldest record, opens it and returns its exchange; ok is
// false when there is none. A record that cannot be read or opened is
// returned as an error (it is lost, and skipped).
func (s *spill) next() (ex *proxy.Exchange, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.segs) > 0 {
		seg := s.segs[0]
		if seg.read < seg.records {
			break
		}
		if seg.w != nil {
			// Caught up with the writer: delete what was read, and let the
			// next exchange start a new segment.
			if seg.records == 0 {
				return nil, false, nil
			}
			seg.w.Close()
			seg.w = nil
		}
		// Read through and closed: delete it.
		if s.rfile != nil {
			s.rfile.Close()
			s.rfile = nil
		}
		os.Remove(filepath.Join(s.dir, segmentName(seg.n)))
		s.bytes -= seg.size
		s.c.spillBytes.Store(s.bytes)
		s.segs = s.segs[1:]
	}
	if len(s.segs) == 0 {
		return nil, false, nil
	}
	seg := s.segs[0]
	seq := s.rseq
	seg.read++
	s.rseq++
	if s.rfile == nil {
		f, err := os.Open(filepath.Join(s.dir, segmentName(seg.n)))
		if err != nil {
			return nil, true, fmt.Errorf("open spill segment: %w", err) // this record is lost; the next call tries again
		}
		s.rfile = f
		if s.rd == nil {
			s.rd = bufio.NewReaderSize(f, spillFlushBytes)
		} else {
			s.rd.Reset(f)
		}
	}
	var hdr [4]byte
	if _, err := io.ReadFull(s.rd, hdr[:]); err != nil {
		return nil, true, fmt.Errorf("read spill: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if cap(s.rbuf) < int(n) {
		s.rbuf = make([]byte, n)
	}
	buf := s.rbuf[:n]
	if _, err := io.ReadFull(s.rd, buf); err != nil {
		return nil, true, fmt.Errorf("read spill: %w", err)
	}
	// Opened into a buffer of its own, which the exchange's fields share:
	// one allocation an exchange, and no plaintext left in rbuf.
	plain := make([]byte, 0, max(0, len(buf)-s.aead.Overhead()))
	plain, err = s.aead.Open(plain, nonce(s.rnonce, seq), buf, nil)
	if err != nil {
		return nil, true, fmt.Errorf("open spilled exchange: %w", err)
	}
	ex, err = decodeExchange(plain, s.sessions)
	return ex, true, err
}

// close closes the files and removes the spill directory with whatever
// is left in it, returning how many records were never read.
func (s *spill) close() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segs {
		if seg.w != nil {
			seg.w.Close()
		}
	}
	if s.rfile != nil {
		s.rfile.Close()
	}
	s.segs = nil
	os.RemoveAll(s.dir)
	s.c.spillBytes.Store(0)
	return s.wseq - s.rseq
}

// encodeExchange appends ex (with its session as a number) to b.
func encodeExchange(b []byte, ex *proxy.Exchange, sess uint64) []byte {
	str := func(b, v []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }
	when := func(b []byte, t time.Time) []byte {
		if t.IsZero() {
			return append(b, 0)
		}
		return binary.AppendVarint(append(b, 1), t.UnixNano())
	}
	var inj []byte
	if len(ex.Injected) > 0 {
		inj, _ = json.Marshal(ex.Injected)
	}
	b = binary.AppendUvarint(b, sess)
	b = str(b, []byte(ex.Direction))
	b = str(b, []byte(ex.Method))
	b = str(b, ex.ID)
	b = str(b, ex.Request)
	b = str(b, ex.Response)
	b = when(b, ex.Started)
	b = when(b, ex.Ended)
	b = binary.AppendUvarint(b, uint64(ex.Notifications))
	var flags byte
	if ex.Cancelled {
		flags |= 1
	}
	if ex.Local {
		flags |= 2
	}
	if ex.Response == nil {
		flags |= 4
	}
	b = append(b, flags)
	b = str(b, []byte(ex.Failure))
	return str(b, inj)
}

var errBadSpill = errors.New("malformed spilled exchange")

// decodeExchange reverses encodeExchange. The exchange's ID, Request and
// Response share b (each capped at its end, so appending to one copies it).
func decodeExchange(b []byte, sessions []*proxy.Session) (*proxy.Exchange, error) {
	bad := false
	uv := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	field := func() []byte {
		n := uv()
		if bad || n > uint64(len(b)) {
			bad = true
			return nil
		}
		if n == 0 {
			return nil // as an empty field was before it was spilled
		}
		v := b[:n:n]
		b = b[n:]
		return v
	}
	when := func() time.Time {
		if len(b) == 0 {
			bad = true
			return time.Time{}
		}
		set := b[0]
		b = b[1:]
		if set == 0 {
			return time.Time{}
		}
		v, n := binary.Varint(b)
		if n <= 0 {
			bad = true
			return time.Time{}
		}
		b = b[n:]
		return time.Unix(0, v)
	}
	ex := &proxy.Exchange{}
	if i := uv(); i > 0 && i <= uint64(len(sessions)) {
		ex.Session = sessions[i-1]
	}
	ex.Direction = hindsight.Direction(field())
	ex.Method = string(field())
	ex.ID = field()
	ex.Request = field()
	ex.Response = field()
	ex.Started = when()
	ex.Ended = when()
	ex.Notifications = int(uv())
	if len(b) == 0 {
		return nil, errBadSpill
	}
	flags := b[0]
	b = b[1:]
	ex.Cancelled, ex.Local = flags&1 != 0, flags&2 != 0
	if flags&4 != 0 {
		ex.Response = nil
	}
	ex.Failure = string(field())
	if inj := field(); len(inj) > 0 && !bad {
		if err := json.Unmarshal(inj, &ex.Injected); err != nil {
			return nil, errBadSpill
		}
	}
	if bad {
		return nil, errBadSpill
	}
	if len(ex.ID) == 0 {
		ex.ID = nil
	}
	return ex, nil
}

// spillLostTotal counts spilled exchanges found after their sidecar died
// and deleted unread (their key died with it), in this process.
var spillLostTotal atomic.Int64

// SpillLost returns how many spilled exchanges this process found in the
// spills of dead sidecars (DrainOrphans) and deleted unread: they were
// sealed with a key that died with their sidecar, so they are lost. The
// Recorder's metrics include it; a daemon can export it.
func SpillLost() int64 { return spillLostTotal.Load() }

// removeDeadSpill deletes dir, the spill of a dead sidecar's outbox,
// counting and logging the exchanges it held, and returns how many.
func removeDeadSpill(dir string, log *slog.Logger) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".seal") {
			n += countRecords(filepath.Join(dir, e.Name()))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		log.Error("remove a dead sidecar's spilled exchanges", "dir", dir, "err", err)
		return 0
	}
	if n > 0 {
		spillLostTotal.Add(n)
		log.Error("a sidecar died with exchanges spilled to disk before redaction; their key died with it, so they were deleted unread and are lost",
			"exchanges", n, "dir", dir)
	}
	return n
}

// countRecords counts the records of a spill segment (a torn last one
// included).
func countRecords(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var n int64
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(f, hdr[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				n++
			}
			return n
		}
		n++
		if _, err := f.Seek(int64(binary.BigEndian.Uint32(hdr[:])), io.SeekCurrent); err != nil {
			return n
		}
	}
}
