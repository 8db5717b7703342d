//go:build !purego

#include "textflag.h"

// func encodeHalfF16C(dst *uint16, src *float32, n int)
TEXT ·encodeHalfF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   encdone

encloop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       encloop

encdone:
	VZEROUPPER
	RET

// func decodeHalfF16C(dst *float32, src *uint16, n int)
TEXT ·decodeHalfF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   decdone

decloop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       decloop

decdone:
	VZEROUPPER
	RET
