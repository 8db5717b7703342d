//go:build !purego

package fastmath

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels: the CPU has AVX2 and the operating system saves the
// YMM registers (cpu.X86.HasAVX2 checks both). Tests switch it off to compare the two
// implementations.
var useAVX2 = cpu.X86.HasAVX2

// useAVX512 selects the AVX-512 exp-sum kernel (16 lanes a register, the same operations and
// summation order as the AVX2 one, so the same bits): a softmax over a vocabulary or over an
// attention row's positions is mostly exponentials.
var useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX2

// expShiftSumBlocks runs the exp-sum kernel over src and returns how many values it took: all
// of them with AVX-512 (the last len mod 32 under a mask), the whole blocks of 32 otherwise.
func expShiftSumBlocks(dst, src []float32, shift float32, lanes *[32]float64) int {
	if useAVX512 {
		expShiftSumAVX512(dst, src, shift, lanes)
		return len(src)
	}
	n := len(src) &^ 31
	if useAVX2 {
		expShiftSumAVX2(dst[:n], src[:n], shift, lanes)
		return n
	}
	expShiftSumGeneric(dst[:n], src[:n], shift, lanes)
	return n
}

func maxBlocks(xs []float32) (float32, bool) {
	if useAVX2 {
		return maxAVX2(xs)
	}
	m, _, nan := maxGeneric(xs)
	return m, nan
}

func indexAboveBlocks(xs []float32, t float32) int {
	if useAVX2 {
		return indexAboveAVX2(xs, t)
	}
	return indexAboveGeneric(xs, t)
}

func scaleBlocks(xs []float32, s float32) {
	if useAVX2 {
		scaleAVX2(xs, s)
		return
	}
	scaleGeneric(xs, s)
}

func divideBlocks(xs []float32, d float32) {
	if useAVX2 {
		divideAVX2(xs, d)
		return
	}
	divideGeneric(xs, d)
}

func siluGateBlocks(gs, es, us []float32) {
	if useAVX2 {
		siluGateAVX2(gs, es, us)
		return
	}
	siluGateGeneric(gs, es, us)
}

func addBlocks(xs, ys []float32) {
	if useAVX2 {
		addAVX2(xs, ys)
		return
	}
	addGeneric(xs, ys)
}

func scaleMulBlocks(dst, xs, ws []float32, s float32) {
	if useAVX2 {
		scaleMulAVX2(dst, xs, ws, s)
		return
	}
	scaleMulGeneric(dst, xs, ws, s)
}

// rotatePairsBlocks is RotatePairs on heads of 4k pairs.
func rotatePairsBlocks(v, cos, sin []float32) {
	if useAVX2 {
		rotatePairsAVX2(v, cos, sin)
		return
	}
	rotatePairsGeneric(v, cos, sin)
}

// rotateHalvesBlocks is RotateHalves on one head of 8k pairs.
func rotateHalvesBlocks(lo, hi, cos, sin []float32) {
	if useAVX2 {
		rotateHalvesAVX2(lo, hi, cos, sin)
		return
	}
	rotateHalvesGeneric(lo, hi, cos, sin)
}

func maskAboveBlocks(dst []uint64, xs []float32, t float32) {
	if useAVX2 {
		maskAboveAVX2(dst, xs, t)
		return
	}
	maskAboveGeneric(dst, xs, t)
}

// The assembly kernels take slices whose length is a multiple of 32 (of 64 for maskAboveAVX2,
// with one dst word per 64 values).

//go:noescape
func expShiftSumAVX2(dst, src []float32, shift float32, lanes *[32]float64)

//go:noescape
func expShiftSumAVX512(dst, src []float32, shift float32, lanes *[32]float64)

//go:noescape
func maxAVX2(xs []float32) (max float32, nan bool)

//go:noescape
func indexAboveAVX2(xs []float32, t float32) int

//go:noescape
func scaleAVX2(xs []float32, s float32)

//go:noescape
func divideAVX2(xs []float32, d float32)

//go:noescape
func maskAboveAVX2(dst []uint64, xs []float32, t float32)

//go:noescape
func siluGateAVX2(gs, es, us []float32)

//go:noescape
func addAVX2(xs, ys []float32)

//go:noescape
func scaleMulAVX2(dst, xs, ws []float32, s float32)

//go:noescape
func rotatePairsAVX2(v, cos, sin []float32)

//go:noescape
func rotateHalvesAVX2(lo, hi, cos, sin []float32)
