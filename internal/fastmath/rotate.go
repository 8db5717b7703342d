package fastmath

import "fmt"

// RotatePairs rotates each adjacent pair of v, (v[2i], v[2i+1]), by the angle whose cosine and
// sine are cos[i] and sin[i] (RoPE's layout in llama-style models):
//
//	v[2i], v[2i+1] = v[2i]·cos[i] − v[2i+1]·sin[i], v[2i]·sin[i] + v[2i+1]·cos[i]
//
// every product and sum rounded to float32 (no fused multiply-add), on every CPU. v holds one
// or more heads of 2·len(cos) values each, all rotated by the same angles; sin must be at least
// as long as cos. It panics when len(v) is not a whole number of heads or sin is shorter.
func RotatePairs(v, cos, sin []float32) {
	half, sin := heads("RotatePairs", v, cos, sin)
	if half == 0 {
		return
	}
	if half&3 == 0 { // the kernel takes every head, four pairs at a time
		rotatePairsBlocks(v, cos, sin)
		return
	}
	n := half &^ 3
	for h := 0; h < len(v); h += 2 * half {
		head := v[h : h+2*half]
		if n > 0 {
			rotatePairsBlocks(head[:2*n], cos[:n], sin[:n])
		}
		rotatePairsGeneric(head[2*n:], cos[n:], sin[n:])
	}
}

// RotateHalves is RotatePairs for the pairs (v[i], v[i+h]) of each head, h = len(cos) (RoPE's
// NeoX layout):
//
//	v[i], v[i+h] = v[i]·cos[i] − v[i+h]·sin[i], v[i]·sin[i] + v[i+h]·cos[i]
func RotateHalves(v, cos, sin []float32) {
	half, sin := heads("RotateHalves", v, cos, sin)
	if half == 0 {
		return
	}
	n := half &^ 7 // pairs the kernel takes, eight at a time
	for h := 0; h < len(v); h += 2 * half {
		lo, hi := v[h:h+half], v[h+half:h+2*half]
		if n > 0 {
			rotateHalvesBlocks(lo[:n], hi[:n], cos[:n], sin[:n])
		}
		rotateHalvesGeneric(lo[n:], hi[n:], cos[n:], sin[n:])
	}
}

// heads returns a rotation's pairs a head, len(cos), and sin cut to as many; it panics
// unless v is a whole number of heads of 2·len(cos) values (a rotation left a partial head as
// it was) and sin has an angle for every pair.
func heads(name string, v, cos, sin []float32) (half int, sinHalf []float32) {
	half = len(cos)
	if half == 0 {
		return 0, nil
	}
	if len(v)%(2*half) != 0 {
		panic(fmt.Sprintf("fastmath: %s of %d values: not a whole number of heads of %d (2·len(cos))", name, len(v), 2*half))
	}
	if len(sin) < half {
		panic(fmt.Sprintf("fastmath: %s with %d sines for %d cosines", name, len(sin), half))
	}
	return half, sin[:half]
}

// rotation is one pair's rotation, every product and sum rounded to float32: each product is
// converted explicitly so that the compiler cannot fuse it into a multiply-add, as the
// assembly does not.
func rotation(x0, x1, c, s float32) (float32, float32) {
	return float32(x0*c) - float32(x1*s), float32(x0*s) + float32(x1*c)
}

// rotatePairsGeneric is RotatePairs in Go, over every head of v (a multiple of 2·len(cos)
// values).
func rotatePairsGeneric(v, cos, sin []float32) {
	sin = sin[:len(cos)]
	for h := 0; h+2*len(cos) <= len(v); h += 2 * len(cos) {
		head := v[h : h+2*len(cos)]
		for i, c := range cos {
			head[2*i], head[2*i+1] = rotation(head[2*i], head[2*i+1], c, sin[i])
		}
	}
}

// rotateHalvesGeneric is RotateHalves on one head in Go, its halves lo and hi.
func rotateHalvesGeneric(lo, hi, cos, sin []float32) {
	sin, lo, hi = sin[:len(cos)], lo[:len(cos)], hi[:len(cos)]
	for i, c := range cos {
		lo[i], hi[i] = rotation(lo[i], hi[i], c, sin[i])
	}
}

// rotateK holds the pair kernel's constants: the permutation that repeats each of four
// angles for both values of its pair, and the sign bit of the even lanes (−sin there).
var rotateK = [2][8]uint32{
	{0, 0, 1, 1, 2, 2, 3, 3},
	{0x80000000, 0, 0x80000000, 0, 0x80000000, 0, 0x80000000, 0},
}
