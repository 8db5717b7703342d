package fastmath

import "math"

// Max returns the largest value of xs and the index of its first occurrence; a NaN anywhere is
// reported through nan = true (the maximum is then over the other values). For an empty slice
// it returns (-Inf, -1, false); when every value is -Inf the index is 0, and when every value
// is -Inf or NaN it is -1.
func Max(xs []float32) (max float32, index int, nan bool) {
	max, nan = MaxValue(xs)
	switch {
	case len(xs) == 0:
		return max, -1, false
	case nan:
		return maxGeneric(xs)
	case math.IsInf(float64(max), -1):
		return max, 0, false
	}
	// The first index holding max is the first value above the float just below max.
	return max, IndexAbove(xs, math.Nextafter32(max, float32(math.Inf(-1)))), false
}

// MaxValue returns the largest value of xs (-Inf for an empty slice) and whether xs holds a
// NaN (the maximum is then over the other values): Max without the index.
func MaxValue(xs []float32) (max float32, nan bool) {
	n := len(xs) &^ 31
	max = float32(math.Inf(-1))
	if n > 0 {
		max, nan = maxBlocks(xs[:n])
	}
	for _, v := range xs[n:] {
		if v > max {
			max = v
		} else if v != v {
			nan = true
		}
	}
	return max, nan
}

// maxGeneric is Max in one plain loop.
func maxGeneric(xs []float32) (max float32, index int, nan bool) {
	max = float32(math.Inf(-1))
	index = -1
	for i, v := range xs {
		if v > max {
			max, index = v, i
		} else if v != v {
			nan = true
		}
	}
	if index < 0 && len(xs) > 0 && !nan {
		index = 0
	}
	return max, index, nan
}

// IndexAbove returns the index of the first value of xs that is not ≤ t — a value above t, or
// a NaN — or len(xs) when there is none. Scanning a row for the few values above a threshold
// (top-k, min-p) is its use: it is memory-bound, about 16 values per nanosecond with AVX2.
func IndexAbove(xs []float32, t float32) int {
	n := len(xs) &^ 31
	if n > 0 {
		if i := indexAboveBlocks(xs[:n], t); i < n {
			return i
		}
	}
	return n + indexAboveGeneric(xs[n:], t)
}

func indexAboveGeneric(xs []float32, t float32) int {
	for i, v := range xs {
		if !(v <= t) {
			return i
		}
	}
	return len(xs)
}

// Scale multiplies every value of xs by s in place.
func Scale(xs []float32, s float32) {
	n := len(xs) &^ 31
	if n > 0 {
		scaleBlocks(xs[:n], s)
	}
	scaleGeneric(xs[n:], s)
}

func scaleGeneric(xs []float32, s float32) {
	for i := range xs {
		xs[i] *= s
	}
}

// Divide divides every value of xs by d in place (a true division, not a multiplication by
// 1/d, so results are those of x / d exactly).
func Divide(xs []float32, d float32) {
	n := len(xs) &^ 31
	if n > 0 {
		divideBlocks(xs[:n], d)
	}
	divideGeneric(xs[n:], d)
}

func divideGeneric(xs []float32, d float32) {
	for i := range xs {
		xs[i] /= d
	}
}

// SiLUGate sets gs[i] = gs[i] / (1 + es[i]) · us[i] for every i < len(gs): given es[i] =
// e**(-gs[i]), SwiGLU's silu(g)·u. The division is a true division and each operation rounds
// to float32 as Go's expression gs[i] / (1 + es[i]) * us[i] does, so the results are its
// bits. es and us must be at least as long as gs; each may be gs itself, and otherwise
// overlaps none of them.
func SiLUGate(gs, es, us []float32) {
	es, us = es[:len(gs)], us[:len(gs)]
	n := len(gs) &^ 31
	if n > 0 {
		siluGateBlocks(gs[:n], es[:n], us[:n])
	}
	siluGateGeneric(gs[n:], es[n:], us[n:])
}

func siluGateGeneric(gs, es, us []float32) {
	es, us = es[:len(gs)], us[:len(gs)]
	for i, g := range gs {
		gs[i] = g / (1 + es[i]) * us[i]
	}
}

// Add sets xs[i] += ys[i] for every i < len(xs); ys must be at least as long, and is xs
// itself or overlaps it nowhere.
func Add(xs, ys []float32) {
	ys = ys[:len(xs)]
	n := len(xs) &^ 31
	if n > 0 {
		addBlocks(xs[:n], ys[:n])
	}
	addGeneric(xs[n:], ys[n:])
}

func addGeneric(xs, ys []float32) {
	ys = ys[:len(xs)]
	for i := range xs {
		xs[i] += ys[i]
	}
}

// ScaleMul sets dst[i] = xs[i] · s · ws[i] for every i < len(dst), rounding after each
// product as Go's xs[i] * s * ws[i] does (a normalised row times its weights). xs and ws must
// be at least as long as dst; each may be dst itself (rmsNorm normalises in place), and
// otherwise overlaps it nowhere.
func ScaleMul(dst, xs, ws []float32, s float32) {
	xs, ws = xs[:len(dst)], ws[:len(dst)]
	n := len(dst) &^ 31
	if n > 0 {
		scaleMulBlocks(dst[:n], xs[:n], ws[:n], s)
	}
	scaleMulGeneric(dst[n:], xs[n:], ws[n:], s)
}

func scaleMulGeneric(dst, xs, ws []float32, s float32) {
	xs, ws = xs[:len(dst)], ws[:len(dst)]
	for i, v := range xs {
		dst[i] = v * s * ws[i]
	}
}

// MaskAbove sets bit i%64 of dst[i/64] when xs[i] is not ≤ t — above t, or NaN — and clears it
// otherwise; dst must hold at least ⌈len(xs)/64⌉ words (bits past len(xs) are cleared).
// Collecting the values of a row above a threshold then costs one vectorised pass plus a few
// operations per value found (bits.TrailingZeros64), however they are spread: a scan that
// stops at every value (IndexAbove) pays a call per value instead.
func MaskAbove(dst []uint64, xs []float32, t float32) {
	n := len(xs) &^ 63
	if n > 0 {
		maskAboveBlocks(dst[:n/64], xs[:n], t)
	}
	if n < len(xs) {
		dst[n/64] = maskAboveWord(xs[n:], t)
	}
}

// maskAboveWord is the mask of up to 64 values.
func maskAboveWord(xs []float32, t float32) uint64 {
	var w uint64
	for j, v := range xs[:min(len(xs), 64)] {
		if !(v <= t) {
			w |= 1 << j
		}
	}
	return w
}

func maskAboveGeneric(dst []uint64, xs []float32, t float32) {
	for k := range dst {
		dst[k] = maskAboveWord(xs[64*k:], t)
	}
}
