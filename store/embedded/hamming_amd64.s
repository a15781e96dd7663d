//go:build !purego

#include "textflag.h"

// func hamming512POPCNT(dist *uint16, codes *uint64, n int, q *[8]uint64)
TEXT ·hamming512POPCNT(SB), NOSPLIT, $0-32
	MOVQ dist+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ q+24(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ 16(AX), R10
	MOVQ 24(AX), R11
	MOVQ 32(AX), R12
	MOVQ 40(AX), R13

loop:
	MOVQ    0(SI), BX
	XORQ    R8, BX
	POPCNTQ BX, BX
	MOVQ    8(SI), DX
	XORQ    R9, DX
	POPCNTQ DX, DX
	ADDQ    DX, BX
	MOVQ    16(SI), DX
	XORQ    R10, DX
	POPCNTQ DX, DX
	ADDQ    DX, BX
	MOVQ    24(SI), DX
	XORQ    R11, DX
	POPCNTQ DX, DX
	ADDQ    DX, BX
	MOVQ    32(SI), DX
	XORQ    R12, DX
	POPCNTQ DX, DX
	ADDQ    DX, BX
	MOVQ    40(SI), DX
	XORQ    R13, DX
	POPCNTQ DX, DX
	ADDQ    DX, BX
	MOVQ    48(SI), DX
	XORQ    48(AX), DX
	POPCNTQ DX, DX
	ADDQ    DX, BX
	MOVQ    56(SI), DX
	XORQ    56(AX), DX
	POPCNTQ DX, DX
	ADDQ    DX, BX
	MOVW    BX, 0(DI)
	ADDQ    $64, SI
	ADDQ    $2, DI
	DECQ    CX
	JNZ     loop
	RET
