//go:build !purego

package embedded

import "golang.org/x/sys/cpu"

// hamming512 is hamming512Go, with POPCNT when the CPU has it: built for
// any amd64 (GOAMD64=v1), Go checks for the instruction at every
// bits.OnesCount64, which takes most of the scan's time.
func hamming512(dist []uint16, codes []uint64, q *[8]uint64) {
	if !cpu.X86.HasPOPCNT {
		hamming512Go(dist, codes, q)
		return
	}
	if n := min(len(dist), len(codes)/8); n > 0 {
		hamming512POPCNT(&dist[0], &codes[0], n, q)
	}
}

// hamming512POPCNT is hamming512Go over n codes (hamming_amd64.s).
//
//go:noescape
func hamming512POPCNT(dist *uint16, codes *uint64, n int, q *[8]uint64)
