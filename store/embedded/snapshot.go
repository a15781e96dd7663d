package embedded

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// A snapshot is the index written to a file when the store closes, so
// that the next Open loads it instead of decoding and tokenising every
// experience. It is trusted only when its checksum (CRC-32C of the whole
// file), format version, embedder and generation all match, and no write
// followed the generation's: the generation is a random value that the
// store writes to Badger (genKey) after the snapshot, and replaces with a
// fresh one as soon as it opens (removing the file), so a snapshot taken
// before any later write, a crash or another writer no longer matches
// and the index is rebuilt from Badger instead.
//
// Layout (little-endian): magic, version, generation, embedder, dimension;
// the interned strings; each slot's filter and ranking fields; padding to
// vectorAlign, then the vector chunks as vectors lays them out in memory
// (so they can be mapped); the scales; the postings; the checksum.
const (
	snapshotName    = "experience-index.snap"
	snapshotMagic   = "HSXIDX\x00\x00"
	snapshotVersion = 1
	// genKey holds the generation of the snapshot that matches Badger's
	// data; any other value means no snapshot does.
	genKey = "expidx/generation"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeSnapshot writes the live slots of x, in key order, to path
// atomically: a temporary file, synced, renamed over path, and the
// directory synced.
func writeSnapshot(path string, x *index, gen []byte, embID string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), snapshotName+".tmp*")
	if err != nil {
		return fmt.Errorf("write index snapshot: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(tmp, h), 1<<16)
	e := &enc{w: w}
	encodeIndex(e, x.compact(true), gen, embID)
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
// embID and dim; otherwise it returns an error saying why not. The
// vectors stay in the file, mapped (see vectors).
func readSnapshot(path string, gen []byte, embID string, dim int) (*index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < 4 {
		return nil, fmt.Errorf("%w: truncated", errCorrupt)
	}
	if err := checkSum(f, fi.Size()-4); err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	d := &dec{r: bufio.NewReaderSize(f, 1<<16), limit: fi.Size() - 4}
	x, err := decodeIndex(d, gen, embID, dim)
	if err != nil {
		return nil, err
	}
	chunks := (len(x.docs) + chunkSlots - 1) / chunkSlots
	region, err := mapRegion(f, x.regionOff, int64(chunks)*x.chunkBytes())
	if err != nil {
		return nil, fmt.Errorf("map index snapshot: %w", err)
	}
	x.attach(region)
	return x, nil
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
