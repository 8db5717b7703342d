//go:build !purego

#include "textflag.h"

// Kernels over slices whose length is a multiple of 32, 8 float32 lanes per YMM register,
// 4 registers per step. See the Go versions in exp.go and vec.go: every element is computed
// with the same operations, so the results are the same bits.

// ·expK rows (32 bytes each): 0 log2e, 1 roundMagic, 2 0x7fffff, 3 0x400000, 4 ln2Hi,
// 5 ln2Lo, 6..12 Taylor coefficients c7..c1, 13 127, 14 expMin, 15 expMax, 16 +Inf, 17 -Inf.

// EXP8 computes e**(x-shift) for the 8 values at off(SI)(AX*4) (shift in Y15), stores them at
// off(DI)(AX*4) and adds them to acc. It uses Y4–Y13.
#define EXP8(off, acc) \
	VMOVUPS   off(SI)(AX*4), Y4 \
	VSUBPS    Y15, Y4, Y4 \
	VMULPS    ·expK+0(SB), Y4, Y5 \
	VADDPS    ·expK+32(SB), Y5, Y5 \
	VPAND     ·expK+64(SB), Y5, Y6 \
	VPSUBD    ·expK+96(SB), Y6, Y6 \
	VSUBPS    ·expK+32(SB), Y5, Y5 \
	VMULPS    ·expK+128(SB), Y5, Y7 \
	VSUBPS    Y7, Y4, Y7 \
	VMULPS    ·expK+160(SB), Y5, Y5 \
	VSUBPS    Y5, Y7, Y7 \
	VMULPS    ·expK+192(SB), Y7, Y8 \
	VADDPS    ·expK+224(SB), Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	VADDPS    ·expK+256(SB), Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	VADDPS    ·expK+288(SB), Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	VADDPS    ·expK+320(SB), Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	VADDPS    ·expK+352(SB), Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	VADDPS    ·expK+384(SB), Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	VADDPS    ·expK+384(SB), Y8, Y8 \
	VPSRAD    $1, Y6, Y9 \
	VPSUBD    Y9, Y6, Y10 \
	VPADDD    ·expK+416(SB), Y9, Y9 \
	VPSLLD    $23, Y9, Y9 \
	VPADDD    ·expK+416(SB), Y10, Y10 \
	VPSLLD    $23, Y10, Y10 \
	VMULPS    Y9, Y8, Y8 \
	VMULPS    Y10, Y8, Y8 \
	VCMPPS    $0x1e, ·expK+448(SB), Y4, Y11 \
	VANDPS    Y11, Y8, Y8 \
	VCMPPS    $0x1e, ·expK+480(SB), Y4, Y12 \
	VBLENDVPS Y12, ·expK+512(SB), Y8, Y8 \
	VCMPPS    $3, Y4, Y4, Y13 \
	VBLENDVPS Y13, Y4, Y8, Y8 \
	VMOVUPS   Y8, off(DI)(AX*4) \
	VADDPS    Y8, acc, acc

// FLUSH adds the 8 float32 lanes of yacc to the float64 lanes at lo(DX) and hi(DX) and clears
// yacc.
#define FLUSH(yacc, xacc, lo, hi) \
	VCVTPS2PD    xacc, Y4 \
	VADDPD       lo(DX), Y4, Y4 \
	VMOVUPD      Y4, lo(DX) \
	VEXTRACTF128 $1, yacc, X5 \
	VCVTPS2PD    X5, Y5 \
	VADDPD       hi(DX), Y5, Y5 \
	VMOVUPD      Y5, hi(DX) \
	VXORPS       yacc, yacc, yacc

// func expShiftSumAVX2(dst, src []float32, shift float32, lanes *[32]float64)
TEXT ·expShiftSumAVX2(SB), NOSPLIT, $0-64
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), CX
	VBROADCASTSS shift+48(FP), Y15
	MOVQ         lanes+56(FP), DX
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y2, Y2, Y2
	VXORPS       Y3, Y3, Y3
	XORQ         AX, AX

loop:
	CMPQ  AX, CX
	JAE   done
	EXP8(0, Y0)
	EXP8(32, Y1)
	EXP8(64, Y2)
	EXP8(96, Y3)
	ADDQ  $32, AX
	TESTQ $1023, AX
	JNZ   loop
	FLUSH(Y0, X0, 0, 32)
	FLUSH(Y1, X1, 64, 96)
	FLUSH(Y2, X2, 128, 160)
	FLUSH(Y3, X3, 192, 224)
	JMP   loop

done:
	FLUSH(Y0, X0, 0, 32)
	FLUSH(Y1, X1, 64, 96)
	FLUSH(Y2, X2, 128, 160)
	FLUSH(Y3, X3, 192, 224)
	VZEROUPPER
	RET

// EXPZ is EXP8 for the 16 values in Z4, its result in Z8 (shift in Z15, +Inf in Z14), the
// constants broadcast from ·expK's rows and the final selections masked (K1–K3). It uses
// Z4–Z10.
#define EXPZ \
	VSUBPS           Z15, Z4, Z4 \
	VMULPS.BCST      ·expK+0(SB), Z4, Z5 \
	VADDPS.BCST      ·expK+32(SB), Z5, Z5 \
	VPANDD.BCST      ·expK+64(SB), Z5, Z6 \
	VPSUBD.BCST      ·expK+96(SB), Z6, Z6 \
	VSUBPS.BCST      ·expK+32(SB), Z5, Z5 \
	VMULPS.BCST      ·expK+128(SB), Z5, Z7 \
	VSUBPS           Z7, Z4, Z7 \
	VMULPS.BCST      ·expK+160(SB), Z5, Z5 \
	VSUBPS           Z5, Z7, Z7 \
	VMULPS.BCST      ·expK+192(SB), Z7, Z8 \
	VADDPS.BCST      ·expK+224(SB), Z8, Z8 \
	VMULPS           Z7, Z8, Z8 \
	VADDPS.BCST      ·expK+256(SB), Z8, Z8 \
	VMULPS           Z7, Z8, Z8 \
	VADDPS.BCST      ·expK+288(SB), Z8, Z8 \
	VMULPS           Z7, Z8, Z8 \
	VADDPS.BCST      ·expK+320(SB), Z8, Z8 \
	VMULPS           Z7, Z8, Z8 \
	VADDPS.BCST      ·expK+352(SB), Z8, Z8 \
	VMULPS           Z7, Z8, Z8 \
	VADDPS.BCST      ·expK+384(SB), Z8, Z8 \
	VMULPS           Z7, Z8, Z8 \
	VADDPS.BCST      ·expK+384(SB), Z8, Z8 \
	VPSRAD           $1, Z6, Z9 \
	VPSUBD           Z9, Z6, Z10 \
	VPADDD.BCST      ·expK+416(SB), Z9, Z9 \
	VPSLLD           $23, Z9, Z9 \
	VPADDD.BCST      ·expK+416(SB), Z10, Z10 \
	VPSLLD           $23, Z10, Z10 \
	VMULPS           Z9, Z8, Z8 \
	VMULPS           Z10, Z8, Z8 \
	VCMPPS.BCST      $0x1e, ·expK+448(SB), Z4, K1 \
	VMOVAPS.Z        Z8, K1, Z8 \
	VCMPPS.BCST      $0x1e, ·expK+480(SB), Z4, K2 \
	VMOVAPS          Z14, K2, Z8 \
	VCMPPS           $3, Z4, Z4, K3 \
	VMOVAPS          Z4, K3, Z8

// EXP16 writes e**(x-shift) of the 16 values at off(SI)(AX*4) to off(DI)(AX*4) and adds them
// to acc.
#define EXP16(off, acc) \
	VMOVUPS off(SI)(AX*4), Z4 \
	EXPZ \
	VMOVUPS Z8, off(DI)(AX*4) \
	VADDPS  Z8, acc, acc

// EXP16M is EXP16 for the lanes of mask k alone: the others are neither read nor written, and
// acc keeps them.
#define EXP16M(off, acc, k) \
	VMOVUPS.Z off(SI)(AX*4), k, Z4 \
	EXPZ \
	VMOVUPS   Z8, k, off(DI)(AX*4) \
	VADDPS    Z8, acc, k, acc

// FLUSH16 adds the 16 float32 lanes of zacc to the float64 lanes at lo(DX) (the low eight) and
// hi(DX) and clears zacc.
#define FLUSH16(zacc, yacc, lo, hi) \
	VCVTPS2PD     yacc, Z4 \
	VADDPD        lo(DX), Z4, Z4 \
	VMOVUPD       Z4, lo(DX) \
	VEXTRACTF64X4 $1, zacc, Y5 \
	VCVTPS2PD     Y5, Z5 \
	VADDPD        hi(DX), Z5, Z5 \
	VMOVUPD       Z5, hi(DX) \
	VXORPS        zacc, zacc, zacc

// func expShiftSumAVX512(dst, src []float32, shift float32, lanes *[32]float64)
TEXT ·expShiftSumAVX512(SB), NOSPLIT, $0-64
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), CX
	MOVQ         CX, BX
	ANDQ         $31, BX
	SUBQ         BX, CX
	VBROADCASTSS shift+48(FP), Z15
	VBROADCASTSS ·expK+512(SB), Z14
	MOVQ         lanes+56(FP), DX
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	XORQ         AX, AX

loop512:
	CMPQ  AX, CX
	JAE   done512
	EXP16(0, Z0)
	EXP16(64, Z1)
	ADDQ  $32, AX
	TESTQ $1023, AX
	JNZ   loop512
	FLUSH16(Z0, Y0, 0, 64)
	FLUSH16(Z1, Y1, 128, 192)
	JMP   loop512

done512:
	FLUSH16(Z0, Y0, 0, 64)
	FLUSH16(Z1, Y1, 128, 192)

	// The last len mod 32 values, in lanes of their own as the Go loop adds them: K4 masks
	// the first 16 of them, K5 the rest.
	TESTQ BX, BX
	JZ    ret512
	MOVQ  BX, CX
	MOVL  $1, R8
	SHLL  CX, R8
	DECL  R8
	KMOVW R8, K4
	SHRL  $16, R8
	KMOVW R8, K5
	EXP16M(0, Z0, K4)
	EXP16M(64, Z1, K5)
	FLUSH16(Z0, Y0, 0, 64)
	FLUSH16(Z1, Y1, 128, 192)

ret512:
	VZEROUPPER
	RET

// func maxAVX2(xs []float32) (max float32, nan bool)
TEXT ·maxAVX2(SB), NOSPLIT, $0-29
	MOVQ    xs_base+0(FP), SI
	MOVQ    xs_len+8(FP), CX
	VMOVUPS ·expK+544(SB), Y0
	VMOVUPS Y0, Y1
	VMOVUPS Y0, Y2
	VMOVUPS Y0, Y3
	VXORPS  Y12, Y12, Y12
	XORQ    AX, AX

loop:
	CMPQ    AX, CX
	JAE     done
	VMOVUPS 0(SI)(AX*4), Y4
	VMOVUPS 32(SI)(AX*4), Y5
	VMOVUPS 64(SI)(AX*4), Y6
	VMOVUPS 96(SI)(AX*4), Y7

	// max(x, acc) returns acc when x is NaN.
	VMAXPS Y0, Y4, Y0
	VMAXPS Y1, Y5, Y1
	VMAXPS Y2, Y6, Y2
	VMAXPS Y3, Y7, Y3
	VCMPPS $3, Y4, Y4, Y8
	VCMPPS $3, Y5, Y5, Y9
	VCMPPS $3, Y6, Y6, Y10
	VCMPPS $3, Y7, Y7, Y11
	VORPS  Y8, Y9, Y8
	VORPS  Y10, Y11, Y10
	VORPS  Y8, Y10, Y8
	VORPS  Y8, Y12, Y12
	ADDQ   $32, AX
	JMP    loop

done:
	VMAXPS       Y1, Y0, Y0
	VMAXPS       Y3, Y2, Y2
	VMAXPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSS       X0, max+24(FP)
	VMOVMSKPS    Y12, BX
	TESTL        BX, BX
	SETNE        nan+28(FP)
	VZEROUPPER
	RET

// func indexAboveAVX2(xs []float32, t float32) int
TEXT ·indexAboveAVX2(SB), NOSPLIT, $0-40
	MOVQ         xs_base+0(FP), SI
	MOVQ         xs_len+8(FP), CX
	VBROADCASTSS t+24(FP), Y15
	XORQ         AX, AX

loop:
	CMPQ AX, CX
	JAE  none

	// Predicate 9 (NGE_US): !(t >= x), true for x > t and for NaN.
	VCMPPS $9, 0(SI)(AX*4), Y15, Y0
	VCMPPS $9, 32(SI)(AX*4), Y15, Y1
	VCMPPS $9, 64(SI)(AX*4), Y15, Y2
	VCMPPS $9, 96(SI)(AX*4), Y15, Y3
	VORPS  Y0, Y1, Y4
	VORPS  Y2, Y3, Y5
	VORPS  Y4, Y5, Y4
	VPTEST Y4, Y4
	JNZ    found
	ADDQ   $32, AX
	JMP    loop

found:
	VMOVMSKPS Y0, BX
	TESTL     BX, BX
	JNZ       bit
	ADDQ      $8, AX
	VMOVMSKPS Y1, BX
	TESTL     BX, BX
	JNZ       bit
	ADDQ      $8, AX
	VMOVMSKPS Y2, BX
	TESTL     BX, BX
	JNZ       bit
	ADDQ      $8, AX
	VMOVMSKPS Y3, BX

bit:
	BSFL BX, BX
	ADDQ BX, AX
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET

none:
	MOVQ CX, ret+32(FP)
	VZEROUPPER
	RET

// func scaleAVX2(xs []float32, s float32)
TEXT ·scaleAVX2(SB), NOSPLIT, $0-28
	MOVQ         xs_base+0(FP), SI
	MOVQ         xs_len+8(FP), CX
	VBROADCASTSS s+24(FP), Y15
	XORQ         AX, AX

loop:
	CMPQ    AX, CX
	JAE     done
	VMULPS  0(SI)(AX*4), Y15, Y0
	VMULPS  32(SI)(AX*4), Y15, Y1
	VMULPS  64(SI)(AX*4), Y15, Y2
	VMULPS  96(SI)(AX*4), Y15, Y3
	VMOVUPS Y0, 0(SI)(AX*4)
	VMOVUPS Y1, 32(SI)(AX*4)
	VMOVUPS Y2, 64(SI)(AX*4)
	VMOVUPS Y3, 96(SI)(AX*4)
	ADDQ    $32, AX
	JMP     loop

done:
	VZEROUPPER
	RET

// func divideAVX2(xs []float32, d float32)
TEXT ·divideAVX2(SB), NOSPLIT, $0-28
	MOVQ         xs_base+0(FP), SI
	MOVQ         xs_len+8(FP), CX
	VBROADCASTSS d+24(FP), Y15
	XORQ         AX, AX

loop:
	CMPQ    AX, CX
	JAE     done
	VMOVUPS 0(SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS 64(SI)(AX*4), Y2
	VMOVUPS 96(SI)(AX*4), Y3
	VDIVPS  Y15, Y0, Y0
	VDIVPS  Y15, Y1, Y1
	VDIVPS  Y15, Y2, Y2
	VDIVPS  Y15, Y3, Y3
	VMOVUPS Y0, 0(SI)(AX*4)
	VMOVUPS Y1, 32(SI)(AX*4)
	VMOVUPS Y2, 64(SI)(AX*4)
	VMOVUPS Y3, 96(SI)(AX*4)
	ADDQ    $32, AX
	JMP     loop

done:
	VZEROUPPER
	RET

// MASK8 puts the 8-bit mask of !(t >= x) for the 8 values at off(SI), shifted left by sh,
// into R9 and ORs it into R8.
#define MASK8(off, sh) \
	VCMPPS    $9, off(SI), Y15, Y0 \
	VMOVMSKPS Y0, R9 \
	SHLQ      $sh, R9 \
	ORQ       R9, R8

// func maskAboveAVX2(dst []uint64, xs []float32, t float32)
TEXT ·maskAboveAVX2(SB), NOSPLIT, $0-52
	MOVQ         dst_base+0(FP), DI
	MOVQ         dst_len+8(FP), CX
	MOVQ         xs_base+24(FP), SI
	VBROADCASTSS t+48(FP), Y15
	XORQ         AX, AX

loop:
	CMPQ      AX, CX
	JAE       done
	VCMPPS    $9, 0(SI), Y15, Y0
	VMOVMSKPS Y0, R8
	MASK8(32, 8)
	MASK8(64, 16)
	MASK8(96, 24)
	MASK8(128, 32)
	MASK8(160, 40)
	MASK8(192, 48)
	MASK8(224, 56)
	MOVQ      R8, (DI)(AX*8)
	ADDQ      $256, SI
	INCQ      AX
	JMP       loop

done:
	VZEROUPPER
	RET

// func siluGateAVX2(gs, es, us []float32)
TEXT ·siluGateAVX2(SB), NOSPLIT, $0-72
	MOVQ         gs_base+0(FP), SI
	MOVQ         gs_len+8(FP), CX
	MOVQ         es_base+24(FP), DI
	MOVQ         us_base+48(FP), DX
	MOVL         $0x3f800000, AX
	MOVL         AX, X15
	VBROADCASTSS X15, Y15
	XORQ         AX, AX

loop:
	CMPQ    AX, CX
	JAE     done
	VADDPS  0(DI)(AX*4), Y15, Y4
	VADDPS  32(DI)(AX*4), Y15, Y5
	VADDPS  64(DI)(AX*4), Y15, Y6
	VADDPS  96(DI)(AX*4), Y15, Y7
	VMOVUPS 0(SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS 64(SI)(AX*4), Y2
	VMOVUPS 96(SI)(AX*4), Y3
	VDIVPS  Y4, Y0, Y0
	VDIVPS  Y5, Y1, Y1
	VDIVPS  Y6, Y2, Y2
	VDIVPS  Y7, Y3, Y3
	VMULPS  0(DX)(AX*4), Y0, Y0
	VMULPS  32(DX)(AX*4), Y1, Y1
	VMULPS  64(DX)(AX*4), Y2, Y2
	VMULPS  96(DX)(AX*4), Y3, Y3
	VMOVUPS Y0, 0(SI)(AX*4)
	VMOVUPS Y1, 32(SI)(AX*4)
	VMOVUPS Y2, 64(SI)(AX*4)
	VMOVUPS Y3, 96(SI)(AX*4)
	ADDQ    $32, AX
	JMP     loop

done:
	VZEROUPPER
	RET

// func addAVX2(xs, ys []float32)
TEXT ·addAVX2(SB), NOSPLIT, $0-48
	MOVQ xs_base+0(FP), SI
	MOVQ xs_len+8(FP), CX
	MOVQ ys_base+24(FP), DI
	XORQ AX, AX

loop:
	CMPQ    AX, CX
	JAE     done
	VMOVUPS 0(SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS 64(SI)(AX*4), Y2
	VMOVUPS 96(SI)(AX*4), Y3
	VADDPS  0(DI)(AX*4), Y0, Y0
	VADDPS  32(DI)(AX*4), Y1, Y1
	VADDPS  64(DI)(AX*4), Y2, Y2
	VADDPS  96(DI)(AX*4), Y3, Y3
	VMOVUPS Y0, 0(SI)(AX*4)
	VMOVUPS Y1, 32(SI)(AX*4)
	VMOVUPS Y2, 64(SI)(AX*4)
	VMOVUPS Y3, 96(SI)(AX*4)
	ADDQ    $32, AX
	JMP     loop

done:
	VZEROUPPER
	RET

// func scaleMulAVX2(dst, xs, ws []float32, s float32)
TEXT ·scaleMulAVX2(SB), NOSPLIT, $0-76
	MOVQ         dst_base+0(FP), DX
	MOVQ         dst_len+8(FP), CX
	MOVQ         xs_base+24(FP), SI
	MOVQ         ws_base+48(FP), DI
	VBROADCASTSS s+72(FP), Y15
	XORQ         AX, AX

loop:
	CMPQ    AX, CX
	JAE     done
	VMULPS  0(SI)(AX*4), Y15, Y0
	VMULPS  32(SI)(AX*4), Y15, Y1
	VMULPS  64(SI)(AX*4), Y15, Y2
	VMULPS  96(SI)(AX*4), Y15, Y3
	VMULPS  0(DI)(AX*4), Y0, Y0
	VMULPS  32(DI)(AX*4), Y1, Y1
	VMULPS  64(DI)(AX*4), Y2, Y2
	VMULPS  96(DI)(AX*4), Y3, Y3
	VMOVUPS Y0, 0(DX)(AX*4)
	VMOVUPS Y1, 32(DX)(AX*4)
	VMOVUPS Y2, 64(DX)(AX*4)
	VMOVUPS Y3, 96(DX)(AX*4)
	ADDQ    $32, AX
	JMP     loop

done:
	VZEROUPPER
	RET

// func rotatePairsAVX2(v, cos, sin []float32)
// Every head of v (2·len(cos) values each), four pairs at a time: len(cos) a multiple of 4,
// len(v) a multiple of 2·len(cos). Each angle is repeated for both values of its pair
// (VPERMPS by ·rotateK's first row), the sine negated in the even lanes (its second row):
// v·cos + swap(v)·(∓sin), products and sum rounded apart.
TEXT ·rotatePairsAVX2(SB), NOSPLIT, $0-72
	MOVQ    v_base+0(FP), DI
	MOVQ    v_len+8(FP), R8
	LEAQ    (DI)(R8*4), R8 // end of v
	MOVQ    cos_base+24(FP), SI
	MOVQ    cos_len+32(FP), CX
	MOVQ    sin_base+48(FP), DX
	VMOVUPS ·rotateK+0(SB), Y14
	VMOVUPS ·rotateK+32(SB), Y15

rothead:
	CMPQ DI, R8
	JAE  rotpairsdone
	XORQ AX, AX

rotpairs:
	CMPQ      AX, CX
	JAE       rotnext
	VMOVUPS   (SI)(AX*4), X1
	VPERMPS   Y1, Y14, Y1
	VMOVUPS   (DX)(AX*4), X2
	VPERMPS   Y2, Y14, Y2
	VXORPS    Y15, Y2, Y2
	VMOVUPS   (DI)(AX*8), Y0
	VPERMILPS $0xb1, Y0, Y3
	VMULPS    Y1, Y0, Y4
	VMULPS    Y2, Y3, Y5
	VADDPS    Y5, Y4, Y4
	VMOVUPS   Y4, (DI)(AX*8)
	ADDQ      $4, AX
	JMP       rotpairs

rotnext:
	LEAQ (DI)(CX*8), DI
	JMP  rothead

rotpairsdone:
	VZEROUPPER
	RET

// func rotateHalvesAVX2(lo, hi, cos, sin []float32)
// Eight pairs at a time: len(cos) a multiple of 8, lo and hi as long.
TEXT ·rotateHalvesAVX2(SB), NOSPLIT, $0-96
	MOVQ lo_base+0(FP), DI
	MOVQ hi_base+24(FP), R8
	MOVQ cos_base+48(FP), SI
	MOVQ cos_len+56(FP), CX
	MOVQ sin_base+72(FP), DX
	XORQ AX, AX

rothalves:
	CMPQ    AX, CX
	JAE     rothalvesdone
	VMOVUPS (SI)(AX*4), Y1
	VMOVUPS (DX)(AX*4), Y2
	VMOVUPS (DI)(AX*4), Y3
	VMOVUPS (R8)(AX*4), Y4
	VMULPS  Y1, Y3, Y5
	VMULPS  Y2, Y4, Y6
	VSUBPS  Y6, Y5, Y5
	VMULPS  Y2, Y3, Y6
	VMULPS  Y1, Y4, Y7
	VADDPS  Y7, Y6, Y6
	VMOVUPS Y5, (DI)(AX*4)
	VMOVUPS Y6, (R8)(AX*4)
	ADDQ    $8, AX
	JMP     rothalves

rothalvesdone:
	VZEROUPPER
	RET
