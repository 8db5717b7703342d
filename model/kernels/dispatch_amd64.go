//go:build !purego

package kernels

import (
	"golang.org/x/sys/cpu"
)

// The assembly needs AVX2 and FMA (every such CPU also has F16C); cpu.X86 reports AVX2 only
// when the operating system saves the YMM registers.
func init() {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return
	}
	asmImpl = &impl{
		name: "avx2",
		dot: [numKinds][4]dotFunc{
			kF32:  {dotF32x1, dotF32x2, dotF32x3, dotF32x4},
			kF16:  {dotF16x1, dotF16x2, dotF16x3, dotF16x4},
			kBF16: {dotBF16x1, dotBF16x2, dotBF16x3, dotBF16x4},
			kQ8_0: {dotQ8_0x1, dotQ8_0x2, dotQ8_0x3, dotQ8_0x4},
			kQ4_0: {dotQ4_0x1, dotQ4_0x2, dotQ4_0x3, dotQ4_0x4},
			kQ4_K: {dotQ4_Kx1, dotQ4_Kx2, dotQ4_Kx3, dotQ4_Kx4},
			kQ6_K: {dotQ6_Kx1, dotQ6_Kx2, dotQ6_Kx3, dotQ6_Kx4},
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
	}
}
