package embedded

import (
	"encoding/binary"
	"slices"
	"testing"
)

// TestPlistRoundTrip: what pack and add store, all gives back in slot
// order, frequencies above one and large gaps included, and a common
// term's posting (gap under 64, frequency 1) takes one byte.
func TestPlistRoundTrip(t *testing.T) {
	var in []posting
	for s := int32(0); s < 1000; s += 3 {
		in = append(in, posting{slot: s, tf: 1})
	}
	in = append(in, posting{slot: 5000, tf: 7}, posting{slot: 1 << 30, tf: 65535})
	shuffled := slices.Clone(in)
	slices.Reverse(shuffled)
	var pk packer
	p := pk.pack(shuffled)
	p.add(1<<30+1, 2)
	want := append(slices.Clone(in), posting{slot: 1<<30 + 1, tf: 2})
	var got []posting
	for s, tf := range p.all() {
		got = append(got, posting{s, tf})
	}
	if !slices.Equal(got, want) || int(p.n) != len(want) {
		t.Fatalf("got %d postings (n %d), want %d: %v", len(got), p.n, len(want), got[len(got)-3:])
	}
	if common := 334; len(p.b) > common+20 {
		t.Errorf("%d bytes for %d postings, %d of them one byte each", len(p.b), len(want), common)
	}
}

// FuzzPlist: any run of ascending slots and frequencies packs and reads
// back unchanged.
func FuzzPlist(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 1, 0, 200, 3, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want []posting
		slot := int32(-1)
		for len(b) >= 3 {
			slot += int32(binary.LittleEndian.Uint16(b)) + 1
			want = append(want, posting{slot: slot, tf: uint16(b[2])*257 + 1})
			b = b[3:]
		}
		var p plist
		for _, q := range want {
			p.add(q.slot, q.tf)
		}
		var got []posting
		for s, tf := range p.all() {
			got = append(got, posting{s, tf})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}
