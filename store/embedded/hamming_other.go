//go:build !amd64 || purego

package embedded

// hamming512 is hamming512Go (an assembly version exists for amd64).
func hamming512(dist []uint16, codes []uint64, q *[8]uint64) { hamming512Go(dist, codes, q) }
