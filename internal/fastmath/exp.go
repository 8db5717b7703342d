// Package fastmath holds the float32 numerics on loom's per-token path: an exponential accurate
// to a few units in the last place that is several times faster than math.Exp, the shifted
// exp-sum that every softmax in loom is built from, the few vocabulary-wide scans that
// processors need (maximum, first value above a threshold, scaling), and the rotations of
// RoPE.
//
// On amd64 with AVX2 the vocabulary-wide loops run in assembly (8 lanes at a time); elsewhere,
// or when built with the purego tag, in Go. Both compute every element with the same float32
// operations in the same order (no fused multiply-add), so results are bit-identical whichever
// runs: a seeded generation does not depend on the CPU it runs on.
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

// Taylor coefficients of e**r, highest degree first.
const (
	c7 = 1.0 / 5040
	c6 = 1.0 / 720
	c5 = 1.0 / 120
	c4 = 1.0 / 24
	c3 = 1.0 / 6
	c2 = 0.5
	c1 = 1.0
)

// Exp returns e**x in float32 with a relative error below 2e-7 (about 2 ulp). It returns 0 for
// x at or below about -87.3 (no subnormals), +Inf above about 88.7, and NaN for NaN.
//
// Method: x = n·ln2 + r with |r| ≤ ln2/2, e**r by its Taylor series to degree 7 (truncation
// error below 6e-9 on that interval), then scaled by 2**n through the exponent bits, in two
// exact steps so that n = 128 does not overflow the exponent field.
func Exp(x float32) float32 {
	switch {
	case x > expMax:
		return float32(math.Inf(1))
	case x > expMin:
		return expInRange(x)
	case x != x:
		return x
	}
	return 0 // x ≤ expMin, -Inf included
}

// expInRange is Exp for expMin < x ≤ expMax. Every product is converted explicitly so the
// compiler cannot fuse it into a multiply-add: the assembly kernel does the same operations
// and must get the same bits.
func expInRange(x float32) float32 {
	t := float32(x*log2e) + roundMagic
	n := int32(math.Float32bits(t)&0x7fffff) - 0x400000 // round(x·log2 e), in [-126, 128]
	fn := t - roundMagic
	r := x - float32(fn*ln2Hi)
	r -= float32(fn * ln2Lo)
	p := float32(c7*r) + c6
	p = float32(p*r) + c5
	p = float32(p*r) + c4
	p = float32(p*r) + c3
	p = float32(p*r) + c2
	p = float32(p*r) + c1
	p = float32(p*r) + c1
	n1 := n >> 1
	return float32(p*pow2(n1)) * pow2(n-n1)
}

// pow2 returns 2**n for -126 ≤ n ≤ 127.
func pow2(n int32) float32 { return math.Float32frombits(uint32(n+127) << 23) }

// ExpShiftSum writes dst[i] = e**(src[i]-shift) (as Exp computes it) and returns the sum of
// dst, accumulated in float64. dst and src may be the same slice. It is the inner loop of
// softmax: call it with shift = max(src), so every term is at most 1 and none overflows. A
// NaN in src makes the sum NaN.
//
// The summation order is fixed: 32 lanes (element i goes to lane i mod 32) accumulate in
// float32 over blocks of 1024 elements and are then added to float64 lane totals; the 32
// totals are summed in lane order at the end.
func ExpShiftSum(dst, src []float32, shift float32) float64 {
	dst = dst[:len(src)]
	var lanes [32]float64
	n := 0
	if len(src) > 0 {
		n = expShiftSumBlocks(dst, src, shift, &lanes)
	}
	if n < len(src) {
		expShiftSumGeneric(dst[n:], src[n:], shift, &lanes)
	}
	var total float64
	for _, l := range lanes {
		total += l
	}
	return total
}

// expShiftSumGeneric is the Go version of the exp-sum kernel: the element and summation rules
// of ExpShiftSum over src, adding into lanes.
func expShiftSumGeneric(dst, src []float32, shift float32, lanes *[32]float64) {
	dst = dst[:len(src)]
	var acc [32]float32
	for i, v := range src {
		e := Exp(v - shift)
		dst[i] = e
		acc[i&31] += e
		if i&1023 == 1023 {
			flushLanes(lanes, &acc)
		}
	}
	flushLanes(lanes, &acc)
}

func flushLanes(lanes *[32]float64, acc *[32]float32) {
	for j, a := range acc {
		lanes[j] += float64(a)
	}
	*acc = [32]float32{}
}

// expK holds the constants of the exp kernel, each repeated in 8 lanes, for the assembly; they
// are the float32 values the Go code above uses. The order is fixed by the assembly.
var expK = func() (k [18][8]uint32) {
	f := math.Float32bits
	vals := [18]uint32{
		f(log2e), f(roundMagic), 0x7fffff, 0x400000, f(ln2Hi), f(ln2Lo),
		f(c7), f(c6), f(c5), f(c4), f(c3), f(c2), f(c1), 127,
		f(expMin), f(expMax), f(float32(math.Inf(1))), f(float32(math.Inf(-1))),
	}
	for i, v := range vals {
		for j := range k[i] {
			k[i][j] = v
		}
	}
	return k
}()
