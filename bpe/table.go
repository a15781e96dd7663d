package bpe

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/maphash"
	"strconv"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// table maps the byte strings of the mergeable tokens to their ranks and
// back. It holds no pointers but its three slices, so the garbage
// collector never scans it: the token bytes end to end, their offsets
// (token r is data[offs[r]:offs[r+1]]) and an open-addressing hash index
// of rank+1 (0 is a free slot).
type table struct {
	data  []byte
	offs  []uint32
	index []uint32
	seed  maphash.Seed
}

// loadTable builds the table of spec from its rank file compiled into the
// binary: one line per token, its bytes in base64 and its rank, ranks
// counting up from 0.
func loadTable(spec encoding) (*table, error) {
	f, err := assets.Assets.Open(spec.file)
	if err != nil {
		return nil, fmt.Errorf("open rank file: %w", err)
	}
	defer f.Close()
	// Read line by line: ReadFile would copy the whole file (1.7 MB for
	// cl100k_base, 3.6 MB for o200k_base) only to drop it.
	t := &table{
		data: make([]byte, 0, spec.bytes),
		offs: make([]uint32, 1, spec.tokens+1),
		seed: maphash.MakeSeed(),
	}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := lines.Bytes()
		if len(line) == 0 {
			continue
		}
		tok, rank, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			return nil, fmt.Errorf("parse rank line %q: no rank", line)
		}
		r, err := strconv.Atoi(string(rank))
		if err != nil || r != len(t.offs)-1 {
			return nil, fmt.Errorf("parse rank line %q: want rank %d", line, len(t.offs)-1)
		}
		t.data, err = base64.StdEncoding.AppendDecode(t.data, tok)
		if err != nil {
			return nil, fmt.Errorf("decode token of rank %d: %w", r, err)
		}
		t.offs = append(t.offs, uint32(len(t.data)))
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("read rank file: %w", err)
	}
	t.data = bytes.Clone(t.data) // drop the spare capacity
	t.buildIndex()
	return t, nil
}

// buildIndex fills the hash index, sized to a power of two at least twice
// the number of tokens so that probes stay short.
func (t *table) buildIndex() {
	size := 1
	for size < 2*t.len() {
		size <<= 1
	}
	t.index = make([]uint32, size)
	mask := uint64(size - 1)
	for r := range t.len() {
		i := maphash.Bytes(t.seed, t.token(r)) & mask
		for t.index[i] != 0 {
			i = (i + 1) & mask
		}
		t.index[i] = uint32(r) + 1
	}
}

// len returns the number of tokens.
func (t *table) len() int { return len(t.offs) - 1 }

// token returns the bytes of rank r.
func (t *table) token(r int) []byte { return t.data[t.offs[r]:t.offs[r+1]] }

// rank returns the rank of the token b, if b is one.
func (t *table) rank(b []byte) (int, bool) {
	mask := uint64(len(t.index) - 1)
	for i := maphash.Bytes(t.seed, b) & mask; t.index[i] != 0; i = (i + 1) & mask {
		if r := int(t.index[i] - 1); bytes.Equal(t.token(r), b) {
			return r, true
		}
	}
	return 0, false
}
