//go:build !amd64 || purego

package fastmath

// useAVX2 and useAVX512 are false where the assembly kernels do not exist.
var useAVX2, useAVX512 = false, false

func expShiftSumBlocks(dst, src []float32, shift float32, lanes *[32]float64) int {
	n := len(src) &^ 31
	expShiftSumGeneric(dst[:n], src[:n], shift, lanes)
	return n
}

func maxBlocks(xs []float32) (float32, bool) {
	m, _, nan := maxGeneric(xs)
	return m, nan
}

func indexAboveBlocks(xs []float32, t float32) int { return indexAboveGeneric(xs, t) }

func scaleBlocks(xs []float32, s float32) { scaleGeneric(xs, s) }

func maskAboveBlocks(dst []uint64, xs []float32, t float32) { maskAboveGeneric(dst, xs, t) }

func divideBlocks(xs []float32, d float32) { divideGeneric(xs, d) }

func siluGateBlocks(gs, es, us []float32) { siluGateGeneric(gs, es, us) }

func addBlocks(xs, ys []float32) { addGeneric(xs, ys) }

func scaleMulBlocks(dst, xs, ws []float32, s float32) { scaleMulGeneric(dst, xs, ws, s) }

func rotatePairsBlocks(v, cos, sin []float32) { rotatePairsGeneric(v, cos, sin) }

func rotateHalvesBlocks(lo, hi, cos, sin []float32) { rotateHalvesGeneric(lo, hi, cos, sin) }
