//go:build !purego

package kernels

import (
	"os"

	"golang.org/x/sys/cpu"

	"github.com/loomlm/loom/internal/cpufeature"
)

// The assembly needs AVX2, FMA and F16C (it converts F16 weights and the half-precision
// scales of the quantised blocks); cpu.X86 reports AVX2 only when the operating system saves
// the YMM registers, and cpufeature.HasF16C reads the flag x/sys/cpu does not expose.
func init() {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA || !cpufeature.HasF16C {
		return
	}
	avx2 := &impl{
		name: "avx2",
		dot: [numKinds][4]dotFunc{
			kF32:    {dotF32x1, dotF32x2, dotF32x3, dotF32x4},
			kF16:    {dotF16x1, dotF16x2, dotF16x3, dotF16x4},
			kBF16:   {dotBF16x1, dotBF16x2, dotBF16x3, dotBF16x4},
			kQ8_0:   {dotQ8_0x1, dotQ8_0x2, dotQ8_0x3, dotQ8_0x4},
			kQ4_0:   {dotQ4_0x1, dotQ4_0x2, dotQ4_0x3, dotQ4_0x4},
			kQ4_K:   {dotQ4_Kx1, dotQ4_Kx2, dotQ4_Kx3, dotQ4_Kx4},
			kQ6_K:   {dotQ6_Kx1, dotQ6_Kx2, dotQ6_Kx3, dotQ6_Kx4},
			kQ4_1:   {dotQ4_1x1, dotQ4_1x2, dotQ4_1x3, dotQ4_1x4},
			kQ5_0:   {dotQ5_0x1, dotQ5_0x2, dotQ5_0x3, dotQ5_0x4},
			kQ5_1:   {dotQ5_1x1, dotQ5_1x2, dotQ5_1x3, dotQ5_1x4},
			kIQ4_NL: {dotIQ4_NLx1, dotIQ4_NLx2, dotIQ4_NLx3, dotIQ4_NLx4},
			kQ2_K:   {dotQ2_Kx1, dotQ2_Kx2, dotQ2_Kx3, dotQ2_Kx4},
			kQ3_K:   {dotQ3_Kx1, dotQ3_Kx2, dotQ3_Kx3, dotQ3_Kx4},
			kQ5_K:   {dotQ5_Kx1, dotQ5_Kx2, dotQ5_Kx3, dotQ5_Kx4},
			kIQ4_XS: {dotIQ4_XSx1, dotIQ4_XSx2, dotIQ4_XSx3, dotIQ4_XSx4},
		},
		attn: attnKernels{
			lanes:  8,
			scores: [2]func(q *float32, k *byte, hd, bs, bstride int, out *float32){attnScoresF32AVX2, attnScoresF16AVX2},
			scores2: [2]func(q *float32, qstride int, k *byte, hd, bs, bstride int, out *float32, ostride int){
				attnScoresF32AVX2x2, attnScoresF16AVX2x2,
			},
			accum: [2][3]func(p *float32, v *byte, vstride, nr int, acc *float32){
				{attnAccumF32x1AVX2, attnAccumF32x2AVX2, attnAccumF32x4AVX2},
				{attnAccumF16x1AVX2, attnAccumF16x2AVX2, attnAccumF16x4AVX2},
			},
			accum2: [2][3]func(p *float32, pstride int, v *byte, vstride, nr int, acc *float32, astride int){
				{attnAccumF32x1AVX2x2, attnAccumF32x2AVX2x2, nil}, // 64 outputs twice pass AVX2's 16 registers
				{attnAccumF16x1AVX2x2, attnAccumF16x2AVX2x2, nil},
			},
			scoresQ8: attnScoresQ8_0AVX2,
			accumQ8:  [2]func(p *float32, v, s *byte, vstride, nr int, acc *float32){attnAccumQ8_0x1AVX2, attnAccumQ8_0x2AVX2},
		},
		axpy: axpyF32,
		quant32: func(dst []byte, x []float32) {
			if len(x) >= 32 {
				quant32(&x[0], len(x)/32, &dst[0])
			}
		},
		quantK: func(dst []byte, x []float32) {
			if len(x) >= 256 {
				quantK(&x[0], len(x)/256, &dst[0])
			}
		},
		quantQ8: func(q []byte, d []uint16, x []float32) {
			if len(x) >= 32 {
				quantQ8_0(&x[0], len(x)/32, &q[0], &d[0])
			}
		},
	}
	fillMissing(avx2)
	asmImpl = avx2
	prefetchFn, prefetchL2Fn = prefetchLines, prefetchLinesL2
	impls = append(impls, avx2)
	// With AVX-512 the float types' products run on 16-wide registers, and those of Q8_0,
	// Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL on VPDPBUSD where the CPU has AVX-512 VNNI; the other
	// types keep their AVX2 kernels. LOOM_KERNELS=avx2 keeps AVX2 for all.
	// The kernels use EVEX-encoded 128- and 256-bit forms on X16–X31 too, which need AVX512VL
	// (every AVX-512 CPU but the Xeon Phi has it).
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512VL {
		return
	}
	avx512 := *avx2
	avx512.name = "avx512"
	avx512.dot[kF32] = [4]dotFunc{dotF32x1AVX512, dotF32x2AVX512, dotF32x3AVX512, dotF32x4AVX512}
	avx512.dot[kF16] = [4]dotFunc{dotF16x1AVX512, dotF16x2AVX512, dotF16x3AVX512, dotF16x4AVX512}
	avx512.dot[kBF16] = [4]dotFunc{dotBF16x1AVX512, dotBF16x2AVX512, dotBF16x3AVX512, dotBF16x4AVX512}
	avx512.rows16[kF32] = dotF32x1Rows16AVX512
	avx512.rows16[kF16] = dotF16x1Rows16AVX512
	avx512.rows16[kBF16] = dotBF16x1Rows16AVX512
	avx512.rows4[kF32] = dotF32x4Rows4AVX512
	avx512.rows4[kF16] = dotF16x4Rows4AVX512
	avx512.rows4[kBF16] = dotBF16x4Rows4AVX512
	avx512.pairs4[kF32] = dotF32x4PairsAVX512
	avx512.pairs4[kF16] = dotF16x4PairsAVX512
	avx512.pairs4[kBF16] = dotBF16x4PairsAVX512
	avx512.pairs4Cached[kF32] = dotF32x4PairsCachedAVX512
	avx512.pairs4Cached[kF16] = dotF16x4PairsCachedAVX512
	avx512.pairs4Cached[kBF16] = dotBF16x4PairsCachedAVX512
	avx512.attn = attnKernels{
		lanes:  16,
		scores: [2]func(q *float32, k *byte, hd, bs, bstride int, out *float32){attnScoresF32AVX512, attnScoresF16AVX512},
		scores2: [2]func(q *float32, qstride int, k *byte, hd, bs, bstride int, out *float32, ostride int){
			attnScoresF32AVX512x2, attnScoresF16AVX512x2,
		},
		accum: [2][3]func(p *float32, v *byte, vstride, nr int, acc *float32){
			{attnAccumF32x1AVX512, attnAccumF32x2AVX512, attnAccumF32x4AVX512},
			{attnAccumF16x1AVX512, attnAccumF16x2AVX512, attnAccumF16x4AVX512},
		},
		accum2: [2][3]func(p *float32, pstride int, v *byte, vstride, nr int, acc *float32, astride int){
			{attnAccumF32x1AVX512x2, attnAccumF32x2AVX512x2, attnAccumF32x4AVX512x2},
			{attnAccumF16x1AVX512x2, attnAccumF16x2AVX512x2, attnAccumF16x4AVX512x2},
		},
		scores4: [2]func(q *float32, qstride int, k *byte, hd, bs, bstride int, out *float32, ostride int){
			attnScoresF32AVX512x4, attnScoresF16AVX512x4,
		},
		accum4: [2][3]func(p *float32, pstride int, v *byte, vstride, nr int, acc *float32, astride int){
			{attnAccumF32x1AVX512x4, attnAccumF32x2AVX512x4, attnAccumF32x4AVX512x4},
			{attnAccumF16x1AVX512x4, attnAccumF16x2AVX512x4, attnAccumF16x4AVX512x4},
		},
		scoresQ8: attnScoresQ8_0AVX2, // in lane groups of 8 (with VNNI, below: 16)
		accumQ8:  [2]func(p *float32, v, s *byte, vstride, nr int, acc *float32){attnAccumQ8_0x1AVX512, attnAccumQ8_0x2AVX512},
	}
	if cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI {
		avx512.dot[kQ8_0] = [4]dotFunc{dotQ8_0x1VNNI, dotQ8_0x2VNNI, dotQ8_0x3VNNI, dotQ8_0x4VNNI}
		avx512.dot[kQ4_0] = [4]dotFunc{dotQ4_0x1VNNI, dotQ4_0x2VNNI, dotQ4_0x3VNNI, dotQ4_0x4VNNI}
		avx512.dot[kQ5_0] = [4]dotFunc{dotQ5_0x1VNNI, dotQ5_0x2VNNI, dotQ5_0x3VNNI, dotQ5_0x4VNNI}
		avx512.dot[kQ4_1] = [4]dotFunc{dotQ4_1x1VNNI, dotQ4_1x2VNNI, dotQ4_1x3VNNI, dotQ4_1x4VNNI}
		avx512.dot[kQ5_1] = [4]dotFunc{dotQ5_1x1VNNI, dotQ5_1x2VNNI, dotQ5_1x3VNNI, dotQ5_1x4VNNI}
		avx512.dot[kIQ4_NL] = [4]dotFunc{dotIQ4_NLx1VNNI, dotIQ4_NLx2VNNI, dotIQ4_NLx3VNNI, dotIQ4_NLx4VNNI}
		avx512.packed[kQ4_0] = [4]packedFunc{dotQ4_0P16x1VNNI, dotQ4_0P16x2VNNI, dotQ4_0P16x3VNNI, dotQ4_0P16x4VNNI}
		avx512.packed[kQ8_0] = [4]packedFunc{dotQ8_0P16x1VNNI, dotQ8_0P16x2VNNI, dotQ8_0P16x3VNNI, dotQ8_0P16x4VNNI}
		avx512.packedPairs[kQ8_0] = dotQ8_0P32x4VNNI
		avx512.attn.scoresQ8 = attnScoresQ8_0VNNI
		avx512.packed[kIQ4_NL] = [4]packedFunc{dotIQ4_NLP16x1VNNI, dotIQ4_NLP16x2VNNI, dotIQ4_NLP16x3VNNI, dotIQ4_NLP16x4VNNI}
	}
	impls = append(impls, &avx512)
	if os.Getenv("LOOM_KERNELS") != "avx2" {
		asmImpl = &avx512
	}
}
