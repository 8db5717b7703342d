//go:build !purego

#include "textflag.h"

// func copyCheckAVX2(dst, src *float32, n int) (bad bool)
//
// Copies n float32s (n a multiple of 32) from src to dst, 32 per iteration, and reports
// whether any is NaN or +Inf: with a = bits & 0x7fffffff, NaN is a > 0x7f800000 (a signed
// compare is exact, a being non-negative) and +Inf is bits == 0x7f800000. The values checked
// are the values stored.
TEXT ·copyCheckAVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0x7fffffff, AX
	MOVD AX, X7
	VPBROADCASTD X7, Y7
	MOVL $0x7f800000, AX
	MOVD AX, X6
	VPBROADCASTD X6, Y6
	VPXOR Y5, Y5, Y5

loop:
	CMPQ CX, $32
	JL   done
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)

	VPAND    Y7, Y0, Y8
	VPCMPGTD Y6, Y8, Y8
	VPCMPEQD Y6, Y0, Y9
	VPOR     Y8, Y5, Y5
	VPOR     Y9, Y5, Y5

	VPAND    Y7, Y1, Y8
	VPCMPGTD Y6, Y8, Y8
	VPCMPEQD Y6, Y1, Y9
	VPOR     Y8, Y5, Y5
	VPOR     Y9, Y5, Y5

	VPAND    Y7, Y2, Y8
	VPCMPGTD Y6, Y8, Y8
	VPCMPEQD Y6, Y2, Y9
	VPOR     Y8, Y5, Y5
	VPOR     Y9, Y5, Y5

	VPAND    Y7, Y3, Y8
	VPCMPGTD Y6, Y8, Y8
	VPCMPEQD Y6, Y3, Y9
	VPOR     Y8, Y5, Y5
	VPOR     Y9, Y5, Y5

	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  loop

done:
	VPTEST Y5, Y5
	SETNE  AL
	MOVB   AL, bad+24(FP)
	VZEROUPPER
	RET
