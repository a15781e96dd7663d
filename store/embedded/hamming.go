package embedded

import "math/bits"

// hamming512Go sets dist[i] to the Hamming distance between q and the i-th
// 8-word code of codes (as many as both hold); the query words stay in
// registers. hamming512 is this or an assembly version of it.
func hamming512Go(dist []uint16, codes []uint64, q *[8]uint64) {
	q0, q1, q2, q3, q4, q5, q6, q7 := q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]
	for i := range dist {
		if len(codes) < 8 {
			return
		}
		p := (*[8]uint64)(codes)
		codes = codes[8:]
		dist[i] = uint16(bits.OnesCount64(p[0]^q0) + bits.OnesCount64(p[1]^q1) +
			bits.OnesCount64(p[2]^q2) + bits.OnesCount64(p[3]^q3) +
			bits.OnesCount64(p[4]^q4) + bits.OnesCount64(p[5]^q5) +
			bits.OnesCount64(p[6]^q6) + bits.OnesCount64(p[7]^q7))
	}
}
