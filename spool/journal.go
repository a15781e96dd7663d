package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/internal/diskspace"
)

// A journal keeps the steps an outbox holds only in memory safe from a
// killed process: Append copies their encodings into the current segment,
// and a segment whose steps have all left memory (delivered, or written
// to the database) is removed, or emptied when it is the current one. The
// daemon drops steps it was given before, so a drainer can hand
// everything a dead sidecar's journal holds to the database and deliver
// it again.
//
// On Linux a segment is a file of mapSegmentSize bytes (more for a larger
// batch), its blocks allocated when it is created and mapped shared: a
// step is journaled by a copy into the mapping, without a system call,
// and the page cache keeps what was copied when the process is killed (a
// power cut loses what the kernel had not written back yet). Elsewhere,
// or where the file system cannot allocate a file's blocks ahead, a
// segment is appended to with one write per call (one per MiB of a large
// batch) and begins anew at journalSegment bytes.
//
// A mapped record is cleared as soon as its step has left memory
// (delivered, or written to the database): release marks it delivered and
// zeroes the rest of it, so that a purge of the daemon's store leaves no
// copy of a delivered step in a running sidecar's journal. A written
// segment cannot be cleared record by record (it is appended to): it is
// truncated when every step of it has left memory, so there a delivered
// step's encoding stays in the journal within journalLinger of its
// delivery while the daemon keeps up, JournalPersistAfter at most while it
// does not. An emptied mapped segment is zeroed whole (by the preparer,
// moments later, when there is one: see drop).
//
// With a journal, the outbox need not hear from the daemon within 50 ms
// of an exchange, so it delivers in batches a quarter of a second apart
// (journalLinger) and writes to its database only what stays unacknowledged
// for JournalPersistAfter. A journal that cannot be written is given up for
// the rest of the process, and the outbox goes back to writing what the
// daemon has not acknowledged within PersistAfter.
//
// A segment is a sequence of records: the payload's length (uint32, little
// endian), the CRC-32 (IEEE) of seq and payload, the step's seq (uint64),
// then the payload, the step's encoding. A torn last record (the process
// died mid-copy) fails its length or checksum and ends the segment, as
// does the zeroed rest of a mapped one. A cleared record has the top bit
// of its length word set (recordCleared) and is skipped whatever its other
// bytes hold: the bit is set first, by a one-byte store, and the rest
// zeroed after, so a process killed while it clears a record leaves a
// segment that reads as if the clearing had finished. Segments written
// before records were cleared read the same (no length has that bit).
//
// The journal's fields are guarded by the writer's wmu (see Spool).
type journal struct {
	dir     string
	f       *os.File // the current segment; nil until the next write
	mem     []byte   // the current segment's mapping; nil when it is written to
	path    string
	last    uint64     // the last seq written to the current segment
	size    int64      // the bytes of records in the current segment
	cleared int64      // the current segment's records before this offset are cleared
	old     []jsegment // full segments, oldest first
	spare   []jsegment // emptied mapped segments, zeroed, for reuse
	buf     []byte
	failing bool
	plain   bool      // segments are written, not mapped (see mapJournal)
	ahead   *preparer // maps segments ahead of need (see preparer); nil until needed

	// The last space check that passed, and the bytes written since: see
	// Spool.journalSpace.
	checkedAt    time.Time
	checkedSince int64
}

// A jsegment is a segment that is not the current one: full, or spare.
type jsegment struct {
	path    string
	last    uint64
	f       *os.File // a mapped segment's, kept open and mapped for reuse
	mem     []byte
	size    int64
	cleared int64 // records before this offset are cleared
}

const (
	journalPrefix = "journal-"
	journalSuffix = ".bin"
	// journalSegment is the size at which a new written segment begins,
	// so that a steady stream of steps does not grow one file for ever.
	journalSegment = 1 << 20
	// mapSegmentSize is the size of a mapped segment: it is allocated
	// whole, so it is kept small (a sidecar holds one while it is idle).
	mapSegmentSize = 256 << 10
	// mapSpares is how many emptied mapped segments are kept for reuse:
	// a page of a new one costs a fault (more than a copy into it) the
	// first time it is written.
	mapSpares     = 8
	journalHeader = 16
	// recordCleared marks a record whose step left memory: set in its
	// length word, which is below it for every record.
	recordCleared = 1 << 31
)

var errJournalOff = errors.New("journal given up")

// mapJournal selects mapped segments where the platform has them; a
// variable so that tests and benchmarks can measure both kinds.
var mapJournal = canMap

// openSegment creates a journal segment, and mapFile maps it; variables
// so tests can make the disk fail.
var (
	openSegment = defaultOpenSegment
	mapFile     = mapSegment
)

func defaultOpenSegment(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND|os.O_TRUNC, 0o600)
}

// write appends the records of entries to the current segment, beginning
// a new one when it is full or there is none.
func (j *journal) write(entries []entry) error {
	if j.failing {
		return errJournalOff
	}
	if len(entries) == 0 {
		return nil
	}
	need := 0
	for _, e := range entries {
		if len(e.raw) >= recordCleared-journalHeader {
			return fmt.Errorf("write journal: a step of %d bytes", len(e.raw))
		}
		need += journalHeader + len(e.raw)
	}
	if j.f != nil && j.mem != nil && int(j.size)+need > len(j.mem) {
		j.retire()
	}
	if j.f == nil {
		if err := j.begin(entries[0].seq, need); err != nil {
			j.failing = true
			return err
		}
	}
	if j.mem != nil {
		for _, e := range entries {
			j.size = int64(len(appendRecord(j.mem[:j.size], e.seq, e.raw)))
		}
		j.last = entries[len(entries)-1].seq
		return nil
	}
	if err := j.writeRecords(entries); err != nil {
		// What was written whole may be read back by a drainer: the
		// segment goes when the whole batch has left memory.
		j.failing = true
		j.last = entries[len(entries)-1].seq
		j.retire()
		return fmt.Errorf("write journal: %w", err)
	}
	j.last = entries[len(entries)-1].seq
	if j.size >= journalSegment {
		j.retire()
	}
	return nil
}

// begin opens a new current segment named after first, the seq of its
// first step, mapped with room for need bytes at least unless the journal
// is plain. A segment that cannot be mapped for a reason other than a
// lack of space makes the journal plain.
func (j *journal) begin(first uint64, need int) error {
	j.cleared = 0
	if n := len(j.spare); n > 0 && len(j.spare[n-1].mem) >= need {
		s := j.spare[n-1]
		j.spare = j.spare[:n-1]
		j.f, j.path, j.size, j.mem = s.f, s.path, 0, s.mem
		j.prepareAhead()
		return nil
	}
	if s, ok := j.ahead.take(need); ok {
		j.f, j.path, j.size, j.mem = s.f, s.path, 0, s.mem
		j.prepareAhead()
		return nil
	}
	path := filepath.Join(j.dir, fmt.Sprintf("%s%016x%s", journalPrefix, first, journalSuffix))
	f, err := openSegment(path)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	j.f, j.path, j.size, j.mem = f, path, 0, nil
	if j.plain || !mapJournal {
		return nil
	}
	page := os.Getpagesize()
	mem, err := mapFile(f, max(mapSegmentSize, (need+page-1)/page*page))
	if err == nil {
		j.mem = mem
		j.prepareAhead()
		return nil
	}
	if !diskspace.IsNoSpace(err) {
		// Written to instead, from its start (the zeros it may have been
		// given would end the segment before the records).
		j.plain = true
		if err = f.Truncate(0); err == nil {
			return nil
		}
		err = fmt.Errorf("open journal: %w", err)
	}
	j.f = nil
	f.Close()
	_ = os.Remove(path)
	return err
}

// retire makes the current segment a full one; a written one is closed.
func (j *journal) retire() {
	s := jsegment{path: j.path, last: j.last, mem: j.mem, size: j.size, cleared: j.cleared}
	if j.mem != nil {
		s.f = j.f
	} else {
		j.f.Close()
	}
	j.f, j.mem = nil, nil
	j.old = append(j.old, s)
}

// drop removes segment s, or keeps it for reuse when it is mapped and
// spares are few, zeroed where it held records. A mapped one goes to the
// preparer when there is one, which does either (its records' bytes stay
// on disk until it has); else it is done here.
func (j *journal) drop(s jsegment) {
	if s.mem != nil && j.ahead.recycle(s) {
		return
	}
	if s.mem != nil && len(j.spare) < mapSpares {
		clear(s.mem[:s.size])
		s.size, s.last, s.cleared = 0, 0, 0
		j.spare = append(j.spare, s)
		return
	}
	if s.mem != nil {
		removeSegment(s)
		return
	}
	_ = os.Remove(s.path)
}

// writeRecords appends the records of entries to the current segment in
// one write, or in writes of up to maxScratch bytes (a larger record alone)
// for a large batch, so that the buffer they are gathered in stays small.
func (j *journal) writeRecords(entries []entry) error {
	buf := j.buf[:0]
	flush := func() error {
		n, err := j.f.Write(buf)
		j.size += int64(n)
		buf = buf[:0]
		return err
	}
	for _, e := range entries {
		if len(buf) > 0 && len(buf)+journalHeader+len(e.raw) > maxScratch {
			if err := flush(); err != nil {
				return err
			}
		}
		buf = appendRecord(buf, e.seq, e.raw)
	}
	err := flush()
	if cap(buf) > 2*maxScratch {
		buf = nil // grown by a record larger than maxScratch: let it go
	}
	j.buf = buf
	return err
}

// release removes the segments that hold only seqs below firstLive (the
// first step still only in memory), and empties the current one when it
// does: a mapped one is zeroed where it held records, a written one
// truncated. In the first mapped segment left, the records below
// firstLive are cleared (see clearRecords).
func (j *journal) release(firstLive uint64) {
	for len(j.old) > 0 && j.old[0].last < firstLive {
		j.drop(j.old[0])
		j.old = j.old[1:]
	}
	if len(j.old) > 0 {
		s := &j.old[0]
		if s.mem != nil {
			s.cleared = clearRecords(s.mem, s.cleared, s.size, firstLive)
		}
		return
	}
	if j.f == nil || j.size == 0 {
		return
	}
	if j.last >= firstLive {
		if j.mem != nil {
			j.cleared = clearRecords(j.mem, j.cleared, j.size, firstLive)
		}
		return
	}
	if j.mem != nil {
		clear(j.mem[:j.size])
		j.size, j.cleared = 0, 0
	} else if err := j.f.Truncate(0); err == nil {
		j.size = 0
	}
}

// clearRecords clears the records of mem[from:size] (from is a record's
// start) whose seqs are below firstLive, from the first on, and returns
// the offset of the first one it left. A record is cleared by setting
// recordCleared in its length word (one byte, so a kill leaves it set or
// not), then zeroing the rest of it: the reader skips it either way.
func clearRecords(mem []byte, from, size int64, firstLive uint64) int64 {
	for from+journalHeader <= size && binary.LittleEndian.Uint64(mem[from+8:]) < firstLive {
		end := from + journalHeader + int64(binary.LittleEndian.Uint32(mem[from:]))
		mem[from+3] |= recordCleared >> 24
		clear(mem[from+4 : end])
		from = end
	}
	return from
}

// close closes every segment and deletes the spares and, with remove,
// the rest.
func (j *journal) close(remove bool) {
	j.ahead.stop()
	j.ahead = nil
	if j.f != nil {
		j.retire()
	}
	for _, s := range append(j.spare, j.old...) {
		if s.mem != nil {
			unmapSegment(s.mem)
			s.f.Close()
		}
	}
	for _, s := range j.spare {
		_ = os.Remove(s.path)
	}
	j.spare = nil
	if remove {
		for _, s := range j.old {
			_ = os.Remove(s.path)
		}
		j.old = nil
	}
}

// appendRecord appends the record of a step to b. The header is built in
// place in b (a header array of its own would escape to the heap through
// crc32).
func appendRecord(b []byte, seq uint64, raw []byte) []byte {
	h := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(raw)))
	b = binary.LittleEndian.AppendUint32(b, 0) // the CRC, below
	b = binary.LittleEndian.AppendUint64(b, seq)
	crc := crc32.Update(crc32.ChecksumIEEE(b[h+8:h+16]), crc32.IEEETable, raw)
	binary.LittleEndian.PutUint32(b[h+4:], crc)
	return append(b, raw...)
}

// parseJournal returns the records of a segment, up to the first torn or
// corrupt one, skipping the cleared ones, and the offset where it stopped.
func parseJournal(data []byte) (out []entry, end int) {
	for len(data)-end >= journalHeader {
		rec := data[end:]
		word := binary.LittleEndian.Uint32(rec)
		n := int(word &^ recordCleared)
		if n > len(rec)-journalHeader {
			break
		}
		if word&recordCleared != 0 {
			end += journalHeader + n
			continue
		}
		seq := binary.LittleEndian.Uint64(rec[8:])
		raw := rec[journalHeader : journalHeader+n]
		if crc32.Update(crc32.ChecksumIEEE(rec[8:16]), crc32.IEEETable, raw) != binary.LittleEndian.Uint32(rec[4:]) {
			break
		}
		out = append(out, entry{seq: seq, raw: raw})
		end += journalHeader + n
	}
	return out, end
}

// readJournal returns the steps the journal segments in dir hold, in seq
// order (the first of duplicates kept), and the segments' paths.
func readJournal(dir string, log *slog.Logger) ([]entry, []string) {
	out, paths, _ := scanJournal(dir, log)
	return out, paths
}

// scanJournal is readJournal that also counts the segments that end in a
// torn or corrupt record rather than in zeros or at their end: a sidecar
// killed while it copied a step in (before that step's answer was sent).
func scanJournal(dir string, log *slog.Logger) (out []entry, paths []string, torn int) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, 0
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, journalPrefix) || !strings.HasSuffix(name, journalSuffix) {
			continue
		}
		path := filepath.Join(dir, name)
		paths = append(paths, path)
		data, err := os.ReadFile(path)
		if err != nil {
			log.Error("cannot read outbox journal; its steps are lost", "path", path, "err", err)
			continue
		}
		recs, used := parseJournal(data)
		if rest := data[used:min(len(data), used+journalHeader)]; slices.ContainsFunc(rest, func(b byte) bool { return b != 0 }) {
			torn++
			log.Warn("outbox journal segment ends in a torn record; skipped", "path", path, "records", len(recs))
		}
		out = append(out, recs...)
	}
	slices.SortStableFunc(out, func(a, b entry) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	out = slices.CompactFunc(out, func(a, b entry) bool { return a.seq == b.seq })
	return out, paths, torn
}
