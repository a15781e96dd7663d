//go:build linux

package imagetrim

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

const sampleSmaps = `00400000-00ef8000 r-xp 00000000 fd:01 123 /usr/bin/hs
Rss:                9436 kB
Anonymous:             0 kB
00ef8000-02141000 r--p 00af8000 fd:01 123 /usr/bin/hs
Rss:                9252 kB
Anonymous:             0 kB
02141000-021f1000 rw-p 01d41000 fd:01 123 /usr/bin/hs
Rss:                 504 kB
Anonymous:           140 kB
021f1000-02200000 r--p 00000000 fd:01 123 /usr/bin/hs
Rss:                   8 kB
Anonymous:             4 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 456 /usr/lib/libc.so.6
Rss:                 920 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
Rss:                7012 kB
Anonymous:          7012 kB
`

// TestReadOnlyImage: only the executable's read-only private mappings
// without a page of their own are picked.
func TestReadOnlyImage(t *testing.T) {
	got := readOnlyImage([]byte(sampleSmaps), "/usr/bin/hs")
	want := []span{{0x400000, 0xef8000}, {0xef8000, 0x2141000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("readOnlyImage = %#x, want %#x", got, want)
	}
}

// TestReadOnlyImagePathWithSpace: an executable's path may hold spaces.
func TestReadOnlyImagePathWithSpace(t *testing.T) {
	smaps := strings.ReplaceAll(sampleSmaps, "/usr/bin/hs", "/opt/my tools/hs (deleted)")
	got := readOnlyImage([]byte(smaps), "/opt/my tools/hs (deleted)")
	want := []span{{0x400000, 0xef8000}, {0xef8000, 0x2141000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("readOnlyImage = %#x, want %#x", got, want)
	}
	if got := readOnlyImage([]byte(smaps), "/opt/my tools/hs"); len(got) != 0 {
		t.Fatalf("readOnlyImage of another path = %#x, want none", got)
	}
}

// TestTrimKeepsRunning: the process runs on after its image is trimmed,
// and its read-only data reads back the same.
func TestTrimKeepsRunning(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("no /proc/self/smaps")
	}
	before := strings.Clone(sampleSmaps)
	if Trim() == 0 {
		t.Fatal("Trim advised no mapping of the test binary")
	}
	if sampleSmaps != before {
		t.Fatal("read-only data changed after Trim")
	}
}
