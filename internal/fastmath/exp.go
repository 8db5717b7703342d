// Package fastmath holds the float32 numerics on loom's per-token path: an exponential accurate
// to a few units in the last place that is several times faster than math.Exp, and the
// shifted exp-sum that every softmax in loom is built from.
package fastmath

import "math"

const (
	log2e  = 1.4426950408889634
	ln2Hi  = 0.693359375
	ln2Lo  = -2.12194440e-4
	expMax = 88.72283905206835
	expMin = -87.33654475055310
	// roundMagic is 1.5·2**23: adding it to a float32 of magnitude below 2**22 rounds the
	// value to an integer held in the low mantissa bits.
	roundMagic = 12582912.0
)

// Exp returns e**x in float32 with a relative error below 2e-7 (about 2 ulp). It returns 0 for
// x below about -87.3 (no subnormals), +Inf above about 88.7, and NaN for NaN.
//
// Method: x = n·ln2 + r with |r| ≤ ln2/2, e**r by its Taylor series to degree 7 (truncation
// error below 6e-9 on that interval), then scaled by 2**n through the exponent bits.
func Exp(x float32) float32 {
	if !(x > expMin) { // also catches NaN and -Inf
		if x != x {
			return x
		}
		return 0
	}
	if x > expMax {
		return float32(math.Inf(1))
	}
	return expInRange(x)
}

// expInRange is Exp for expMin < x <= expMax.
func expInRange(x float32) float32 {
	t := x*log2e + roundMagic
	n := int32(math.Float32bits(t)&0x7fffff) - 0x400000 // round(x·log2 e), in [-126, 128]
	fn := t - roundMagic
	r := x - fn*ln2Hi
	r -= fn * ln2Lo
	p := float32(1.0 / 5040)
	p = p*r + 1.0/720
	p = p*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	// 2**128 overflows float32, so that case scales in two steps.
	if n > 127 {
		return 2 * p * math.Float32frombits(uint32(n+126)<<23)
	}
	return p * math.Float32frombits(uint32(n+127)<<23)
}

// ExpShiftSum writes dst[i] = e**(src[i]-shift) and returns the sum of dst, accumulated in
// float64. dst and src may be the same slice. It is the inner loop of softmax: call it with
// shift = max(src), so every term is at most 1 and none overflows (a term above shift is
// computed by Exp). A NaN in src makes the sum NaN.
func ExpShiftSum(dst, src []float32, shift float32) float64 {
	dst = dst[:len(src)]
	var sum0, sum1 float32
	var total float64
	for i, v := range src {
		x := v - shift
		var e float32
		switch {
		case x > 0:
			e = Exp(x)
		case x > expMin:
			// expInRange, written out so the compiler keeps it in the loop.
			t := x*log2e + roundMagic
			n := int32(math.Float32bits(t)&0x7fffff) - 0x400000
			fn := t - roundMagic
			r := x - fn*ln2Hi
			r -= fn * ln2Lo
			p := float32(1.0 / 5040)
			p = p*r + 1.0/720
			p = p*r + 1.0/120
			p = p*r + 1.0/24
			p = p*r + 1.0/6
			p = p*r + 0.5
			p = p*r + 1
			p = p*r + 1
			e = p * math.Float32frombits(uint32(n+127)<<23)
		case x != x:
			e = x
		}
		dst[i] = e
		if i&1 == 0 {
			sum0 += e
		} else {
			sum1 += e
		}
		if i&1023 == 1023 { // flush the float32 partial sums so precision stays at float64 level
			total += float64(sum0) + float64(sum1)
			sum0, sum1 = 0, 0
		}
	}
	return total + float64(sum0) + float64(sum1)
}

// Max returns the largest value of xs and its index; a NaN anywhere is reported through
// nan = true. For an empty slice it returns (-Inf, -1, false); when every value is -Inf the
// index is 0.
func Max(xs []float32) (max float32, index int, nan bool) {
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
