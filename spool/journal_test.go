package spool

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/wire"
)

// TestParseJournal: records come back as written, up to a torn or corrupt
// one.
func TestParseJournal(t *testing.T) {
	var seg []byte
	for i, raw := range []string{`{"a":1}`, ``, "{\"b\":\"x\ny\"}"} {
		seg = appendRecord(seg, uint64(10+i), []byte(raw))
	}
	whole, end := parseJournal(seg)
	if len(whole) != 3 || whole[0].seq != 10 || string(whole[0].raw) != `{"a":1}` || whole[2].seq != 12 || string(whole[2].raw) != "{\"b\":\"x\ny\"}" {
		t.Fatalf("whole segment: %+v", whole)
	}
	if end != len(seg) {
		t.Fatalf("whole segment: parsed to %d of %d bytes", end, len(seg))
	}
	flip := bytes.Clone(seg)
	flip[journalHeader+3] ^= 1 // the first payload
	for name, tc := range map[string]struct {
		data []byte
		want int
	}{
		"torn header":   {seg[:len(seg)-len("{\"b\":\"x\ny\"}")-3], 2},
		"torn payload":  {seg[:len(seg)-1], 2},
		"corrupt first": {flip, 0},
		"empty":         {nil, 0},
		"garbage":       {[]byte("not a journal at all, just text"), 0},
	} {
		if got, _ := parseJournal(tc.data); len(got) != tc.want {
			t.Errorf("%s: %d records, want %d", name, len(got), tc.want)
		}
	}
}

// TestJournalSegments: a full written segment is followed by a new one;
// release removes the segments whose steps all left memory and empties the
// current one; readJournal gives the steps of what is left in seq order.
func TestJournalSegments(t *testing.T) {
	dir := t.TempDir()
	j := &journal{dir: dir, plain: true}
	big := bytes.Repeat([]byte("x"), journalSegment/2)
	for seq := uint64(1); seq <= 5; seq++ {
		if err := j.write([]entry{{seq: seq, raw: big}}); err != nil {
			t.Fatal(err)
		}
	}
	files := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, journalPrefix+"*"))
		return m
	}
	if n := len(files()); n != 3 {
		t.Fatalf("%d segments, want 3 (two full, one current)", n)
	}
	j.release(3) // steps 1 and 2 left memory
	if n := len(files()); n != 2 {
		t.Fatalf("after release: %d segments, want 2", n)
	}
	got, paths := readJournal(dir, slog.New(slog.DiscardHandler))
	if len(paths) != 2 || !slices.EqualFunc(got, []entry{{seq: 3}, {seq: 4}, {seq: 5}}, func(a, b entry) bool { return a.seq == b.seq }) {
		t.Fatalf("left: %d paths, seqs %v", len(paths), got)
	}
	j.release(6)
	got, _ = readJournal(dir, slog.New(slog.DiscardHandler))
	if len(got) != 0 {
		t.Fatalf("after releasing everything: %d steps", len(got))
	}
	if err := j.write([]entry{{seq: 6, raw: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	j.close(true)
	if n := len(files()); n != 0 {
		t.Fatalf("after close: %d segments", n)
	}
}

// FuzzParseJournal: any bytes parse without panicking into records that
// each encode back to the bytes at their place in the input, in order,
// within the prefix parsed.
func FuzzParseJournal(f *testing.F) {
	two := appendRecord(appendRecord(nil, 1, []byte(`{"a":1}`)), 2, []byte(`{}`))
	f.Add(two)
	f.Add([]byte{})
	f.Add([]byte("garbage garbage garbage"))
	cleared := bytes.Clone(two)
	clearRecords(cleared, 0, int64(len(cleared)), 2)
	f.Add(cleared)
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, end := parseJournal(data)
		if end > len(data) {
			t.Fatalf("parsed to %d of %d bytes", end, len(data))
		}
		at := 0
		for _, e := range recs {
			i := bytes.Index(data[at:end], appendRecord(nil, e.seq, e.raw))
			if i < 0 {
				t.Fatalf("record %d does not encode back to the input after offset %d", e.seq, at)
			}
			at += i + journalHeader + len(e.raw)
		}
	})
}

// TestDrainOrphanJournal: the outbox of a sidecar that died with steps only
// in its journal (no database yet, a torn last record) is drained: the
// whole records are delivered in order, the torn one is counted lost
// (crash), and the outbox is removed.
func TestDrainOrphanJournal(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	dir := filepath.Join(home.Outboxes(), "dead")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var seg []byte
	for seq := uint64(1); seq <= 3; seq++ {
		at := spooltest.Base.Add(time.Duration(seq-1) * time.Second) // as CheckInOrder wants
		s := hindsight.Step{Source: "dead", Seq: seq, Method: "tools/call", StartedAt: at, EndedAt: at}
		raw, err := wire.AppendCompactStep(nil, &s)
		if err != nil {
			t.Fatal(err)
		}
		seg = appendRecord(seg, seq, raw)
	}
	seg = append(seg, appendRecord(nil, 4, []byte(`{"seq":4}`))[:10]...) // torn
	if err := os.WriteFile(filepath.Join(dir, journalPrefix+"0000000000000001"+journalSuffix), seg, 0o600); err != nil {
		t.Fatal(err)
	}
	d := &spooltest.Collector{}
	n, err := DrainOrphans(context.Background(), home, d, DrainOptions{})
	if err != nil || n != 3 {
		t.Fatalf("drained %d, %v; want 3", n, err)
	}
	spooltest.CheckInOrder(t, d.Got(), 3, "dead")
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("drained outbox not removed: %v", err)
	}
	if l := losses.Scan(string(home)); len(l) != 1 || l[0].Lost != 1 || l[0].Reasons[losses.Crash] != 1 {
		t.Errorf("losses %+v, want the torn record counted (crash)", l)
	}
}

// TestOutboxJournalFails: a journal that cannot be written is given up and
// counted; the steps it did not take reach Badger PersistAfter after their
// exchange, not JournalPersistAfter.
func TestOutboxJournalFails(t *testing.T) {
	openSegment = func(string) (*os.File, error) { return nil, errors.New("no space left on device") }
	defer func() { openSegment = defaultOpenSegment }()
	o, c := openStalled(t, Options{PersistAfter: 20 * time.Millisecond, JournalPersistAfter: time.Hour})
	o.Append([]hindsight.Step{{Method: "tools/call", EndedAt: time.Now()}, {Method: "tools/call", EndedAt: time.Now()}})
	if o.journalOn.Load() || c.writeErrors.Load() != 1 {
		t.Fatalf("journal on %v, write errors %d", o.journalOn.Load(), c.writeErrors.Load())
	}
	testkit.WaitFor(t, "the steps on disk", 20*time.Second, func() bool { return c.spilled.Load() == 2 })
	if o.linger() != deliverLinger {
		t.Errorf("linger %v without a journal", o.linger())
	}
}

// TestJournalRecordLayout: a record is the payload's length, the CRC-32 of
// seq and payload, the seq, then the payload, as the segments on disk hold
// them.
func TestJournalRecordLayout(t *testing.T) {
	for _, tc := range []struct {
		seq uint64
		raw string
	}{{1, `{}`}, {0xfedcba9876543210, ``}, {42, `{"method":"tools/call","x":"é"}`}} {
		want := binary.LittleEndian.AppendUint32(nil, uint32(len(tc.raw)))
		seq := binary.LittleEndian.AppendUint64(nil, tc.seq)
		want = binary.LittleEndian.AppendUint32(want, crc32.ChecksumIEEE(append(slices.Clone(seq), tc.raw...)))
		want = append(append(want, seq...), tc.raw...)
		prefix := []byte("prev")
		got := appendRecord(slices.Clone(prefix), tc.seq, []byte(tc.raw))
		if !bytes.Equal(got, append(prefix, want...)) {
			t.Errorf("seq %d %q: record %x, want %x", tc.seq, tc.raw, got[len(prefix):], want)
		}
	}
}

// TestJournalLargeBatch: a batch larger than the journal's buffer is
// written whole, in several writes, and the buffer kept stays small.
func TestJournalLargeBatch(t *testing.T) {
	j := journal{dir: t.TempDir()}
	raw := bytes.Repeat([]byte("x"), 4000)
	var batch []entry
	for i := range 3 * maxScratch / len(raw) {
		batch = append(batch, entry{seq: uint64(i + 1), raw: raw})
	}
	batch = append(batch, entry{seq: uint64(len(batch) + 1), raw: bytes.Repeat([]byte("y"), 3*maxScratch)})
	if err := j.write(batch); err != nil {
		t.Fatal(err)
	}
	path := j.path
	if j.f == nil {
		path = j.old[len(j.old)-1].path
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := parseJournal(data)
	if len(got) != len(batch) {
		t.Fatalf("read back %d records, want %d", len(got), len(batch))
	}
	for i, e := range got {
		if e.seq != batch[i].seq || !bytes.Equal(e.raw, batch[i].raw) {
			t.Fatalf("record %d: seq %d, %d bytes; want seq %d, %d bytes", i, e.seq, len(e.raw), batch[i].seq, len(batch[i].raw))
		}
	}
	if cap(j.buf) > 2*maxScratch {
		t.Errorf("journal keeps a buffer of %d bytes", cap(j.buf))
	}
	j.close(true)
}

// TestMappedJournal: mapped segments hold the records copied into them
// (read back from the files, as a drainer does, while they are still
// mapped); a full one is followed by a new one; released segments are kept
// as spares and reused, and no byte of a released record is left in any
// file; close removes the spares.
func TestMappedJournal(t *testing.T) {
	if !canMap {
		t.Skip("no mapped journal on this platform")
	}
	defer func(was int) { segmentsAhead = was }(segmentsAhead)
	segmentsAhead = 0 // the spares without a preparer (see TestJournalPreparesAhead)
	dir := t.TempDir()
	j := &journal{dir: dir}
	defer j.close(true)
	secret := []byte("purged-value-7f3a9c")
	raw := append(bytes.Repeat([]byte("x"), 1000), secret...)
	seq := uint64(0)
	write := func(n int) {
		for range n {
			seq++
			if err := j.write([]entry{{seq: seq, raw: raw}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	files := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, journalPrefix+"*"))
		return m
	}
	perSegment := mapSegmentSize / (journalHeader + len(raw))
	write(2*perSegment + 10)
	if j.mem == nil {
		t.Fatal("the segment is not mapped")
	}
	if n := len(files()); n != 3 {
		t.Fatalf("%d segments, want 3 (two full, one current)", n)
	}
	got, _ := readJournal(dir, slog.New(slog.DiscardHandler))
	if len(got) != int(seq) || got[0].seq != 1 || got[len(got)-1].seq != seq || !bytes.Equal(got[7].raw, raw) {
		t.Fatalf("read back %d records, want %d", len(got), seq)
	}
	j.release(seq + 1) // everything delivered
	if got, _ := readJournal(dir, slog.New(slog.DiscardHandler)); len(got) != 0 {
		t.Fatalf("after release: %d records", len(got))
	}
	for _, f := range files() {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, secret) {
			t.Errorf("%s still holds a released record", filepath.Base(f))
		}
	}
	if len(j.spare) != 2 {
		t.Fatalf("%d spares, want 2", len(j.spare))
	}
	write(perSegment + 1) // the current segment, then a spare
	if n := len(files()); n != 3 || len(j.spare) != 1 {
		t.Fatalf("%d segments and %d spares, want the 3 files reused", n, len(j.spare))
	}
	if got, _ := readJournal(dir, slog.New(slog.DiscardHandler)); len(got) != perSegment+1 {
		t.Fatalf("read back %d records, want %d", len(got), perSegment+1)
	}
	j.close(false) // steps still only in memory: kept for a drainer
	if n := len(files()); n != 2 {
		t.Fatalf("after close: %d segments, want the 2 that hold steps", n)
	}
}

// TestMappedJournalTorn: a record torn at any byte (the process killed
// mid-copy) ends its segment: recovery finds every record before it
// exactly once and nothing of it.
func TestMappedJournalTorn(t *testing.T) {
	if !canMap {
		t.Skip("no mapped journal on this platform")
	}
	raws := [][]byte{[]byte(`{"a":1}`), []byte(`{"b":"two"}`), []byte(`{"c":[3,3,3]}`)}
	var whole []byte
	for i, r := range raws {
		whole = appendRecord(whole, uint64(i+1), r)
	}
	lastStart := len(whole) - journalHeader - len(raws[2])
	for cut := lastStart; cut < len(whole); cut++ {
		dir := t.TempDir()
		j := &journal{dir: dir}
		if err := j.write([]entry{{seq: 1, raw: raws[0]}, {seq: 2, raw: raws[1]}}); err != nil {
			t.Fatal(err)
		}
		copy(j.mem[lastStart:cut], whole[lastStart:cut]) // the third, killed mid-copy
		got, _ := readJournal(dir, slog.New(slog.DiscardHandler))
		if len(got) != 2 || got[0].seq != 1 || got[1].seq != 2 || !bytes.Equal(got[1].raw, raws[1]) {
			t.Fatalf("cut at %d: read back %+v", cut, got)
		}
		j.close(true)
	}
}

// FuzzReadJournal: any bytes at the head of a mapped segment (its rest
// zero) read back from the file without panicking as the records the
// segment holds, in seq order and each seq once.
func FuzzReadJournal(f *testing.F) {
	f.Add(appendRecord(appendRecord(nil, 2, []byte(`{"a":1}`)), 1, []byte(`{}`)))
	f.Add(appendRecord(appendRecord(nil, 1, []byte(`{}`)), 1, []byte(`{}`)))
	f.Add(appendRecord(nil, 3, []byte(`{"x":2}`))[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > mapSegmentSize {
			return
		}
		dir := t.TempDir()
		seg := make([]byte, mapSegmentSize)
		copy(seg, data)
		if err := os.WriteFile(filepath.Join(dir, journalPrefix+"0000000000000001"+journalSuffix), seg, 0o600); err != nil {
			t.Fatal(err)
		}
		got, _ := readJournal(dir, slog.New(slog.DiscardHandler))
		seqs := map[uint64]bool{}
		recs, _ := parseJournal(seg)
		for _, e := range recs {
			seqs[e.seq] = true
		}
		if len(got) != len(seqs) {
			t.Fatalf("%d records read, want %d distinct seqs", len(got), len(seqs))
		}
		for i, e := range got {
			if !seqs[e.seq] || i > 0 && got[i-1].seq >= e.seq {
				t.Fatalf("record %d: seq %d out of order or unknown", i, e.seq)
			}
		}
	})
}

// TestJournalMapFails: a segment that cannot be mapped (after its zeros
// were written) is written to instead, from its start, and so are the
// segments after it: every record reads back.
func TestJournalMapFails(t *testing.T) {
	if !canMap {
		t.Skip("no mapped journal on this platform")
	}
	mapFile = func(f *os.File, size int) ([]byte, error) {
		f.Write(make([]byte, size))
		return nil, errors.New("map journal: operation not supported")
	}
	defer func() { mapFile = mapSegment }()
	dir := t.TempDir()
	j := &journal{dir: dir}
	defer j.close(true)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := j.write([]entry{{seq: seq, raw: []byte(`{"n":1}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	if !j.plain || j.mem != nil {
		t.Fatalf("plain %v, mapped %v", j.plain, j.mem != nil)
	}
	if got, _ := readJournal(dir, slog.New(slog.DiscardHandler)); len(got) != 3 {
		t.Fatalf("read back %d records, want 3", len(got))
	}
}

// TestMappedJournalClears: a step that left memory (delivered, or written
// to the database) while others of its segment are still only in memory
// is cleared from the segment at once, in a full segment and in the
// current one: its bytes are in no file, and recovery still reads every
// step left, as if the cleared ones were not there (not as a torn record).
func TestMappedJournalClears(t *testing.T) {
	if !canMap {
		t.Skip("no mapped journal on this platform")
	}
	defer func(was int) { segmentsAhead = was }(segmentsAhead)
	segmentsAhead = 0 // a dropped segment zeroed here, not by a preparer (see TestJournalPreparesAhead)
	dir := t.TempDir()
	j := &journal{dir: dir}
	defer j.close(true)
	raw := func(seq uint64) []byte {
		return fmt.Appendf(bytes.Repeat([]byte("x"), 1000), "secret-%05d", seq)
	}
	perSegment := uint64(mapSegmentSize / (journalHeader + len(raw(1))))
	last := perSegment + perSegment/2 // one full segment, the current one half full
	for seq := uint64(1); seq <= last; seq++ {
		if err := j.write([]entry{{seq: seq, raw: raw(seq)}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(firstLive uint64) {
		t.Helper()
		var all []byte
		for _, p := range glob(t, dir) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, data...)
		}
		for _, seq := range []uint64{1, firstLive/2 + 1, firstLive - 1, firstLive, last} {
			if held := bytes.Contains(all, raw(seq)); held != (seq >= firstLive) {
				t.Errorf("release(%d): step %d on disk %v", firstLive, seq, held)
			}
		}
		got, _, torn := scanJournal(dir, slog.New(slog.DiscardHandler))
		if torn != 0 || uint64(len(got)) != last-firstLive+1 || got[0].seq != firstLive || !bytes.Equal(got[0].raw, raw(firstLive)) {
			t.Fatalf("release(%d): read back %d steps (torn %d), want %d from %d", firstLive, len(got), torn, last-firstLive+1, firstLive)
		}
	}
	j.release(perSegment / 2) // in the full segment
	check(perSegment / 2)
	j.release(perSegment + 3) // the full one dropped, in the current one
	check(perSegment + 3)
	j.release(perSegment + 3) // again: nothing more
	check(perSegment + 3)
	// A record killed while being cleared (its mark set, the rest not
	// zeroed yet, or part of it) is skipped all the same.
	seq := perSegment + 3
	for _, zeroed := range []int{4, 9, journalHeader + 10} {
		rec := appendRecord(nil, seq, raw(seq))
		rec[3] |= recordCleared >> 24
		clear(rec[4:zeroed])
		both := append(rec, appendRecord(nil, seq+1, raw(seq+1))...)
		got, end := parseJournal(both)
		if len(got) != 1 || got[0].seq != seq+1 || end != len(both) {
			t.Errorf("record killed while cleared (%d bytes zeroed): read %d records to %d", zeroed, len(got), end)
		}
	}
}

// TestJournalPreparesAhead: once the spares run out, new segments come
// from the preparer (made beforehand, off the writer's path) rather than
// from a synchronous create; the segments released are handed to it,
// zeroed (no byte of their records left in any file) and reused; close
// removes what it holds and keeps the segments with steps.
func TestJournalPreparesAhead(t *testing.T) {
	if !canMap {
		t.Skip("no mapped journal on this platform")
	}
	dir := t.TempDir()
	j := &journal{dir: dir}
	secret := []byte("released-4c1e")
	raw := append(bytes.Repeat([]byte("y"), 4000), secret...)
	perSegment := mapSegmentSize / (journalHeader + len(raw))
	seq := uint64(0)
	fill := func(segments int) {
		for range segments * perSegment {
			seq++
			if err := j.write([]entry{{seq: seq, raw: raw}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill(1) // the first segment: the preparer does not start for one
	if j.ahead != nil {
		t.Fatal("a preparer for a journal of one segment")
	}
	fill(1) // the second: no spare, so the preparer starts
	if j.ahead == nil {
		t.Fatal("no preparer after the spares ran out")
	}
	testkit.WaitFor(t, "segments ready", 20*time.Second, func() bool { return len(j.ahead.ready) == segmentsAhead })
	fill(1)
	if !strings.Contains(filepath.Base(j.path), "ahead-") {
		t.Errorf("the next segment %s was created on the writer's path, not prepared", filepath.Base(j.path))
	}
	if got, _ := readJournal(dir, slog.New(slog.DiscardHandler)); uint64(len(got)) != seq {
		t.Fatalf("read back %d records, want %d", len(got), seq)
	}
	fill(1) // a fourth segment, the current one full
	// Everything delivered: the three full segments go to the preparer,
	// which zeroes them; the current one is zeroed in place.
	j.release(seq + 1)
	if len(j.spare) != 0 {
		t.Errorf("%d spares zeroed on the writer's path", len(j.spare))
	}
	testkit.WaitFor(t, "the released segments zeroed", 20*time.Second, func() bool {
		return len(j.ahead.recycled) == 0 && len(j.ahead.ready) >= 3
	})
	files := glob(t, dir)
	for _, p := range files {
		if data, _ := os.ReadFile(p); bytes.Contains(data, secret) {
			t.Errorf("%s still holds a released record", filepath.Base(p))
		}
	}
	fill(3) // from the current one and the ready ones: no new file
	if n := len(glob(t, dir)); n != len(files) {
		t.Errorf("%d segment files after reuse, want the %d there were", n, len(files))
	}
	if got, _ := readJournal(dir, slog.New(slog.DiscardHandler)); len(got) != 3*perSegment {
		t.Fatalf("read back %d records, want %d", len(got), 3*perSegment)
	}
	j.close(false) // steps only in memory: their segments are kept
	for _, p := range glob(t, dir) {
		if recs, _ := parseJournal(must(os.ReadFile(p))); len(recs) == 0 {
			t.Errorf("%s holds no record but was left after close", filepath.Base(p))
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func glob(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, journalPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
