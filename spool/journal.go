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
)

// A journal keeps the steps an outbox holds only in memory safe from a
// killed process: Append writes their encodings to the current segment
// file, one write per call (one per MiB of a large batch; the page cache
// keeps what was written when the process dies), and a segment whose steps
// have all left memory (delivered, or written to the database) is removed,
// or emptied when it is the current one. The daemon drops steps it was given before, so a drainer
// can hand everything a dead sidecar's journal holds to the database and
// deliver it again.
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
// died mid-write) fails its length or checksum and ends the segment.
//
// The journal's fields are guarded by the writer's wmu (see Spool).
type journal struct {
	dir     string
	f       *os.File // the current segment; nil until the next write
	path    string
	last    uint64 // the last seq written to the current segment
	size    int64
	old     []jsegment // full segments, oldest first
	buf     []byte
	failing bool

	// The last space check that passed, and the bytes written since: see
	// Spool.journalSpace.
	checkedAt    time.Time
	checkedSince int64
}

type jsegment struct {
	path string
	last uint64
}

const (
	journalPrefix = "journal-"
	journalSuffix = ".bin"
	// journalSegment is the size at which a new segment begins, so that
	// a steady stream of steps does not grow one file for ever.
	journalSegment = 1 << 20
	journalHeader  = 16
)

var errJournalOff = errors.New("journal given up")

// openSegment creates a journal segment; a variable so tests can make the
// disk fail.
var openSegment = defaultOpenSegment

func defaultOpenSegment(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
}

// write appends the records of entries to the current segment (see
// writeRecords).
func (j *journal) write(entries []entry) error {
	if j.failing {
		return errJournalOff
	}
	if len(entries) == 0 {
		return nil
	}
	if j.f == nil {
		path := filepath.Join(j.dir, fmt.Sprintf("%s%016x%s", journalPrefix, entries[0].seq, journalSuffix))
		f, err := openSegment(path)
		if err != nil {
			j.failing = true
			return fmt.Errorf("open journal: %w", err)
		}
		j.f, j.path, j.size = f, path, 0
	}
	err := j.writeRecords(entries)
	if err != nil {
		// What was written whole may be read back by a drainer: the
		// segment goes when the whole batch has left memory.
		j.failing = true
		j.f.Close()
		j.f = nil
		j.old = append(j.old, jsegment{j.path, entries[len(entries)-1].seq})
		return fmt.Errorf("write journal: %w", err)
	}
	j.last = entries[len(entries)-1].seq
	if j.size >= journalSegment {
		j.f.Close()
		j.old = append(j.old, jsegment{j.path, j.last})
		j.f = nil
	}
	return nil
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
// does.
func (j *journal) release(firstLive uint64) {
	for len(j.old) > 0 && j.old[0].last < firstLive {
		_ = os.Remove(j.old[0].path)
		j.old = j.old[1:]
	}
	if j.f != nil && j.size > 0 && j.last < firstLive {
		if err := j.f.Truncate(0); err == nil {
			j.size = 0
		}
	}
}

// close closes the current segment and, with remove, deletes every segment.
func (j *journal) close(remove bool) {
	if j.f != nil {
		j.f.Close()
		j.f = nil
		j.old = append(j.old, jsegment{j.path, j.last})
	}
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
// corrupt one.
func parseJournal(data []byte) []entry {
	var out []entry
	for len(data) >= journalHeader {
		n := int(binary.LittleEndian.Uint32(data[0:]))
		if n > len(data)-journalHeader {
			break
		}
		seq := binary.LittleEndian.Uint64(data[8:])
		raw := data[journalHeader : journalHeader+n]
		if crc32.Update(crc32.ChecksumIEEE(data[8:16]), crc32.IEEETable, raw) != binary.LittleEndian.Uint32(data[4:]) {
			break
		}
		out = append(out, entry{seq: seq, raw: raw})
		data = data[journalHeader+n:]
	}
	return out
}

// readJournal returns the steps the journal segments in dir hold, in seq
// order (the first of duplicates kept), and the segments' paths.
func readJournal(dir string, log *slog.Logger) ([]entry, []string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	var out []entry
	var paths []string
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
		out = append(out, parseJournal(data)...)
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
	return out, paths
}
