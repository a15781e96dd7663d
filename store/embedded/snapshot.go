package embedded

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// A snapshot is the index written to a file, so that Open loads it
// instead of decoding and tokenising every experience. It records the
// Badger version it covers: the index held every write up to that
// version when it was taken. Open loads it and replays what Badger holds
// above that version (see replay), so a snapshot taken before a crash
// stays usable, and recovery costs what changed since. The store takes a
// new one when enough has changed (see checkpoint.go) and at Close.
//
// It is trusted only when its checksum (CRC-32C of the whole file),
// format version, embedder and generation all match and Badger holds
// the version it covers. The generation is the database's identity: a
// random value the store records in Badger (genKey) when it first opens
// the database; a Hindsight that predates this format replaces it on
// every open, so that a snapshot of this format no longer matches after
// it wrote.
//
// Layout (little-endian): magic, version, generation, covered version,
// embedder, dimension; the interned strings; each slot's filter and
// ranking fields; padding to vectorAlign, then the vector chunks as
// vectors lays them out in memory (so they can be mapped); the scales;
// the postings; the checksum.
const (
	snapshotName  = "experience-index.snap"
	snapshotMagic = "HSXIDX\x00\x00"
	// 3: the database keeps change keys (replay); 4: or a bulk marker
	// (bulkKey), which a build reading only 3 would not see: it rebuilds.
	snapshotVersion = 4
	// oldestSnapshot is the oldest format read (the same layout).
	oldestSnapshot = 3
	// genKey holds the database's generation (its identity), which a
	// snapshot must carry.
	genKey = "expidx/generation"
	// bulkKey, while present, says that a bulk (BeginBulk) wrote records
	// and vectors without change keys since the snapshot on disk: a
	// replay then scans the tables (see replay). The bulk's end takes a
	// snapshot covering them and deletes it.
	bulkKey = "expidx/bulk"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeSnapshot writes cx (compacted: every slot live) to path
// atomically: a temporary file, synced, renamed over path, and the
// directory synced. A mapping of the file it replaces stays valid.
func writeSnapshot(path string, cx *index, gen []byte, covers uint64, embID string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), snapshotName+".tmp*")
	if err != nil {
		return fmt.Errorf("write index snapshot: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(tmp, h), 1<<16)
	e := &enc{w: w}
	encodeIndex(e, cx, gen, covers, embID)
	if e.err == nil {
		e.err = w.Flush()
	}
	if e.err == nil {
		_, e.err = tmp.Write(binary.LittleEndian.AppendUint32(nil, h.Sum32()))
	}
	if e.err == nil {
		e.err = tmp.Sync()
	}
	if err := tmp.Close(); e.err == nil {
		e.err = err
	}
	if e.err == nil {
		e.err = os.Rename(tmp.Name(), path)
	}
	if e.err == nil {
		e.err = syncDir(filepath.Dir(path))
	}
	if e.err != nil {
		return fmt.Errorf("write index snapshot: %w", e.err)
	}
	return nil
}

// removeFile removes path, if there, and syncs its directory.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes a rename in dir durable (Windows cannot sync a
// directory; its renames are durable once done).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readSnapshot loads the index in path when it is whole and matches gen,
// embID and dim, and returns the Badger version it covers; otherwise it
// returns an error saying why not. The vectors stay in the file, mapped
// (see vectors).
func readSnapshot(path string, gen []byte, embID string, dim int) (*index, uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if fi.Size() < 4 {
		return nil, 0, fmt.Errorf("%w: truncated", errCorrupt)
	}
	if err := checkSum(f, fi.Size()-4); err != nil {
		return nil, 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	d := &dec{r: bufio.NewReaderSize(f, 1<<16), limit: fi.Size() - 4}
	x, covers, err := decodeIndex(d, gen, embID, dim)
	if err != nil {
		return nil, 0, err
	}
	chunks := (len(x.docs) + chunkSlots - 1) / chunkSlots
	region, err := mapRegion(f, x.regionOff, int64(chunks)*x.chunkBytes())
	if err != nil {
		return nil, 0, fmt.Errorf("map index snapshot: %w", err)
	}
	x.attach(region)
	return x, covers, nil
}

// checkSum compares the CRC-32C of the first n bytes of f with the four
// bytes that follow them.
func checkSum(f *os.File, n int64) error {
	h := crc32.New(castagnoli)
	if _, err := io.CopyN(h, f, n); err != nil {
		return fmt.Errorf("%w: %v", errCorrupt, err)
	}
	var sum [4]byte
	if _, err := io.ReadFull(f, sum[:]); err != nil {
		return fmt.Errorf("%w: %v", errCorrupt, err)
	}
	if !bytes.Equal(sum[:], binary.LittleEndian.AppendUint32(nil, h.Sum32())) {
		return fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	return nil
}
