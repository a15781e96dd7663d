package embedded

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
	"unsafe"
)

// enc writes the little-endian fields of a snapshot; the first error
// sticks and later writes do nothing.
type enc struct {
	w   *bufio.Writer
	b   [8]byte
	n   int64 // bytes written
	err error
}

func (e *enc) raw(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
		e.n += int64(len(p))
	}
}

// align pads the output to a multiple of n bytes.
func (e *enc) align(n int64) {
	if r := e.n % n; r != 0 {
		e.raw(make([]byte, n-r))
	}
}

func (e *enc) u8(v uint8)   { e.raw([]byte{v}) }
func (e *enc) u16(v uint16) { binary.LittleEndian.PutUint16(e.b[:], v); e.raw(e.b[:2]) }
func (e *enc) u32(v uint32) { binary.LittleEndian.PutUint32(e.b[:], v); e.raw(e.b[:4]) }
func (e *enc) u64(v uint64) { binary.LittleEndian.PutUint64(e.b[:], v); e.raw(e.b[:8]) }
func (e *enc) i32(v int32)  { e.u32(uint32(v)) }
func (e *enc) i64(v int64)  { e.u64(uint64(v)) }
func (e *enc) f32(v float32) {
	e.u32(math.Float32bits(v))
}
func (e *enc) f64(v float64) { e.u64(math.Float64bits(v)) }
func (e *enc) str(s string) {
	e.u32(uint32(len(s)))
	if e.err == nil {
		_, e.err = e.w.WriteString(s)
		e.n += int64(len(s))
	}
}

// noTime stands for the zero time.Time in a snapshot.
const noTime = math.MinInt64

// time writes t as seconds and nanoseconds since the Unix epoch (UTC).
func (e *enc) time(t time.Time) {
	if t.IsZero() {
		e.i64(noTime)
		e.u32(0)
		return
	}
	e.i64(t.Unix())
	e.u32(uint32(t.Nanosecond()))
}

// errCorrupt is the error of a snapshot that does not decode.
var errCorrupt = errors.New("corrupt index snapshot")

// dec reads what enc wrote; the first error sticks and later reads
// return zero values. Lengths are checked against limit, the bytes left
// in the snapshot, so a corrupt length cannot allocate more than the
// file holds.
type dec struct {
	r     *bufio.Reader
	b     [8]byte
	limit int64
	off   int64 // bytes read
	buf   []byte
	err   error
}

func (d *dec) raw(p []byte) {
	if d.err != nil {
		clear(p)
		return
	}
	if int64(len(p)) > d.limit {
		d.err = fmt.Errorf("%w: truncated", errCorrupt)
		clear(p)
		return
	}
	if _, err := io.ReadFull(d.r, p); err != nil {
		d.err = fmt.Errorf("%w: %v", errCorrupt, err)
		clear(p)
		return
	}
	d.limit -= int64(len(p))
	d.off += int64(len(p))
}

// skip passes over n bytes.
func (d *dec) skip(n int64) {
	if d.err != nil {
		return
	}
	if n > d.limit {
		d.err = fmt.Errorf("%w: truncated", errCorrupt)
		return
	}
	if _, err := d.r.Discard(int(n)); err != nil {
		d.err = fmt.Errorf("%w: %v", errCorrupt, err)
		return
	}
	d.limit -= n
	d.off += n
}

// align skips the padding enc.align wrote.
func (d *dec) align(n int64) {
	if r := d.off % n; r != 0 {
		d.skip(n - r)
	}
}

func (d *dec) u8() uint8    { d.raw(d.b[:1]); return d.b[0] }
func (d *dec) u16() uint16  { d.raw(d.b[:2]); return binary.LittleEndian.Uint16(d.b[:]) }
func (d *dec) u32() uint32  { d.raw(d.b[:4]); return binary.LittleEndian.Uint32(d.b[:]) }
func (d *dec) u64() uint64  { d.raw(d.b[:8]); return binary.LittleEndian.Uint64(d.b[:]) }
func (d *dec) i32() int32   { return int32(d.u32()) }
func (d *dec) i64() int64   { return int64(d.u64()) }
func (d *dec) f32() float32 { return math.Float32frombits(d.u32()) }
func (d *dec) f64() float64 { return math.Float64frombits(d.u64()) }

func (d *dec) time() time.Time {
	sec, nsec := d.i64(), d.u32()
	if sec == noTime {
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// count reads a length of items of size bytes each and checks that the
// snapshot can hold them.
func (d *dec) count(size int64) int {
	n := int64(d.u32())
	if d.err == nil && n*size > d.limit {
		d.err = fmt.Errorf("%w: length %d out of range", errCorrupt, n)
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}

func (d *dec) str() string {
	n := d.count(1)
	if n == 0 {
		return ""
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	d.raw(d.buf[:n])
	return string(d.buf[:n])
}

// int8Bytes and wordBytes view vector storage as bytes for I/O (the
// snapshot is little-endian, as are the platforms Hindsight ships for).
func int8Bytes(v []int8) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v))
}

func wordBytes(v []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
}
