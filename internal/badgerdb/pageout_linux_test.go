package badgerdb

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

func TestTableMapping(t *testing.T) {
	dir := "/home/u/.hindsight/daemon/experiences/"
	for _, tc := range []struct {
		line       string
		start, end uintptr
		ok         bool
	}{
		{"7f68c6800000-7f68c6bc9000 rw-s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/000120.sst", 0x7f68c6800000, 0x7f68c6bc9000, true},
		{"7f68c6800000-7f68c6bc9000 r--s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/000120.sst", 0x7f68c6800000, 0x7f68c6bc9000, true},
		{"7f68c6800000-7f68c6bc9000 rw-p 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/000120.sst", 0, 0, false}, // private
		{"7f68c6800000-7f68c6bc9000 rw-s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/000120.vlog", 0, 0, false},
		{"7f68c6800000-7f68c6bc9000 rw-s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/experience-index.snap", 0, 0, false},
		{"7f68c6800000-7f68c6bc9000 rw-s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/traces/000001.sst", 0, 0, false},
		{"7f68c6800000-7f68c6bc9000 rw-s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/sub/000001.sst", 0, 0, false},
		{"7f68c6800000-7f68c6bc9000 rw-s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/000120.sst (deleted)", 0, 0, false},
		{"7f68c6bc9000-7f68c6800000 rw-s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/000120.sst", 0, 0, false}, // end before start
		{"zz-7f68c6bc9000 rw-s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/000120.sst", 0, 0, false},
		{"7f68c6800000 rw-s 00000000 fe:00 10332539   /home/u/.hindsight/daemon/experiences/000120.sst", 0, 0, false},
		{"7ffd1c5a3000-7ffd1c5c4000 rw-p 00000000 00:00 0                          [stack]", 0, 0, false},
		{"", 0, 0, false},
	} {
		start, end, ok := tableMapping(tc.line, dir)
		if start != tc.start || end != tc.end || ok != tc.ok {
			t.Errorf("tableMapping(%q) = %#x, %#x, %v; want %#x, %#x, %v", tc.line, start, end, ok, tc.start, tc.end, tc.ok)
		}
	}
}

func FuzzTableMapping(f *testing.F) {
	f.Add("7f68c6800000-7f68c6bc9000 rw-s 00000000 fe:00 10332539   /d/000120.sst")
	f.Add("7ffd1c5a3000-7ffd1c5c4000 rw-p 00000000 00:00 0   [stack]")
	f.Fuzz(func(t *testing.T, line string) {
		start, end, ok := tableMapping(line, "/d/")
		if ok && (end <= start || !strings.Contains(line, "/d/") || !strings.Contains(line, ".sst")) {
			t.Fatalf("tableMapping(%q) = %#x, %#x, true", line, start, end)
		}
	})
}

// tableRSS sums the resident kilobytes of this process's mappings of
// table files in dir.
func tableRSS(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	kb, inTable := 0, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 { // a mapping's first line
			inTable = len(f) >= 6 && strings.HasPrefix(f[5], dir) && strings.HasSuffix(f[5], ".sst")
			continue
		}
		if n, ok := strings.CutPrefix(line, "Rss:"); ok && inTable {
			v, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(n), " kB"))
			kb += v
		}
	}
	return kb
}

// TestPageOutTables: tables whose every key was read are resident;
// paged out they are not, and every key still reads back its value.
func TestPageOutTables(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(Options(dir, quiet).WithSyncWrites(false).WithValueThreshold(1 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := rand.New(rand.NewPCG(3, 4))
	val := func(i int) []byte { // incompressible, so that the tables are 30 MB
		b := make([]byte, 1000)
		vr := rand.New(rand.NewPCG(uint64(i), 5))
		for j := 0; j < len(b); j += 8 {
			binary.LittleEndian.PutUint64(b[j:], vr.Uint64())
		}
		return b
	}
	for b := range 60 {
		err := db.Update(func(txn *badger.Txn) error {
			for i := range 500 {
				k := b*500 + i
				if err := txn.Set([]byte(fmt.Sprintf("k%08d", r.IntN(1<<30)<<16|k)), val(k)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	readAll := func() {
		t.Helper()
		n := 0
		err := db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.DefaultIteratorOptions)
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().Key()
				i, _ := strconv.Atoi(string(k[1:]))
				err := it.Item().Value(func(v []byte) error {
					if !bytes.Equal(v, val(i&(1<<16-1))) {
						return fmt.Errorf("key %s: value changed", k)
					}
					return nil
				})
				if err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil || n != 30000 {
			t.Fatalf("read back %d of 30000 keys: %v", n, err)
		}
	}
	readAll() // every table's pages resident
	before := tableRSS(t, dir)
	if before < 10<<10 {
		t.Fatalf("%d kB of tables resident after reading every key; want the tables' 30 MB", before)
	}
	advised, err := PageOutTables(dir)
	if err != nil {
		t.Fatal(err)
	}
	if advised == 0 {
		b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(b)
		if unix.Madvise(b, unix.MADV_PAGEOUT) == unix.EINVAL {
			t.Skip("MADV_PAGEOUT refused (a kernel before 5.4)")
		}
		t.Fatal("no table paged out")
	}
	if after := tableRSS(t, dir); after > before/4 {
		t.Fatalf("%d kB of tables resident after paging out %d bytes; %d kB before", after, advised, before)
	}
	readAll()
}
