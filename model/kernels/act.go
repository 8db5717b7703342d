package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/loomlm/loom/model/ggml"
)

// Quantised activation layouts, shared with the assembly (internal/asmgen). A row of x is
// quantised to 8 bits per block as llama.cpp's x86 code quantises it, so that a product on
// the same weights gives the same integer sums and the same scales: with amax the largest
// |x| of the block, q = round(x·(127/amax)) to the nearest integer, ties to even, and
//
//	Q8_0, Q4_0 (llama.cpp's Q8_0 activations, blocks of 32): the scale d = amax/127 rounded
//	    to half precision (to nearest, ties to even), stored here as the float32 of that half.
//	    Groups of four blocks of 32, 176 bytes per group:
//	    float32 d[4]; int32 corr[4]; int32 zero[4]; int8 q[128]
//	  where corr[k] = −8·Σq over block k (the Q4_0 offset). A row's last group may be partial;
//	  its unused blocks are zero. For Q4_1 and Q5_1 the zero words hold instead each block's
//	  sum s as llama.cpp's Q8_1 has it (blockSums).
//	Q4_K, Q6_K (llama.cpp's Q8_K activations, super-blocks of 256): the float32 scale
//	    d = 1/(127/amax). 308 bytes:
//	    float32 d; int16 sum16[16]; int16 sum32[8]; int8 q[256]
//	  where sum16[k] and sum32[k] are the sums of q over the k-th 16 and 32 elements.
//
// (llama.cpp's Q8_K keeps the sign of the element of largest magnitude in its scale and
// negates the quants to match; the products are the same.) As in llama.cpp, the half-precision
// scale of the 32-blocks is a subnormal half, with fewer significant bits, for amax below
// 127·2^-14 ≈ 7.8e-3, and overflows to infinity for amax above 65504·127 ≈ 8.3e6.
const (
	act32Group = 176
	act32Corr  = 16
	act32Sum   = 32
	act32Q     = 48
	actKBytes  = 308
	actKSum16  = 4
	actKSum32  = 36
	actKQ      = 52
)

// act32Bytes returns the bytes of the quantised form of a row of cols (a multiple of 32).
func act32Bytes(cols int) int { return (cols/32 + 3) / 4 * act32Group }

// act32Block returns the scale, the Q4_0 correction and the quants of block b of a row.
func act32Block(row []byte, b int) (d float32, corr int32, q []byte) {
	g := row[b/4*act32Group:]
	k := b % 4
	return lef32(g[4*k:]), int32(binary.LittleEndian.Uint32(g[act32Corr+4*k:])), g[act32Q+32*k : act32Q+32*k+32]
}

// scale32 returns the scale d of a 32-block with largest magnitude amax, amax/127 rounded
// to half precision, and the inverse 127/amax that quantises the block (0 when amax is 0).
func scale32(amax float32) (d, id float32) {
	if amax == 0 {
		return 0, 0
	}
	return ggml.HalfToFloat32(ggml.Float32ToHalf(amax / 127)), 127 / amax
}

// scaleK returns the scale d = 1/(127/amax) of a 256-block with largest magnitude amax and
// the inverse 127/amax that quantises the block (both 0 when amax is 0).
func scaleK(amax float32) (d, id float32) {
	if amax == 0 {
		return 0, 0
	}
	id = 127 / amax
	return 1 / id, id
}

// round8 rounds v (|v| ≤ 127 plus rounding) to the nearest integer, ties to even, as the
// assembly's VCVTPS2DQ does.
func round8(v float32) int8 {
	return int8(math.RoundToEven(float64(v)))
}

func absMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		if v < 0 {
			v = -v
		}
		if v > m {
			m = v
		}
	}
	return m
}

// quant32Generic writes the quantised form of x (len(x) a multiple of 32) to dst
// (act32Bytes(len(x)) bytes), leaving the unused blocks of a last partial group as they are.
func quant32Generic(dst []byte, x []float32) {
	for b := 0; b < len(x)/32; b++ {
		xs := x[b*32 : b*32+32]
		g := dst[b/4*act32Group : (b/4+1)*act32Group]
		k := b % 4
		d, id := scale32(absMax(xs))
		binary.LittleEndian.PutUint32(g[4*k:], math.Float32bits(d))
		q := g[act32Q+32*k : act32Q+32*k+32]
		var s int32
		for j, v := range xs {
			r := round8(v * id)
			q[j] = byte(r)
			s += int32(r)
		}
		binary.LittleEndian.PutUint32(g[act32Corr+4*k:], uint32(-8*s))
		binary.LittleEndian.PutUint32(g[act32Corr+16+4*k:], 0)
	}
}

// QuantizeQ8_0 quantises x (len(x) a multiple of 32) to Q8_0 blocks as llama.cpp's x86
// quantiser does: for each block of 32 values with largest magnitude amax, the scale
// d = amax/127 rounded to half precision, stored in d, and the 32 values x·(127/amax) rounded
// to nearest (ties to even), stored in q as signed bytes (0 and 0 for a block of zeros). q must
// hold len(x) bytes, d len(x)/32 values. A KV cache of Q8_0 stores its keys and values so.
func QuantizeQ8_0(q []byte, d []uint16, x []float32) {
	if len(x)%32 != 0 || len(q) < len(x) || len(d) < len(x)/32 {
		panic(fmt.Sprintf("kernels: QuantizeQ8_0 of %d values into %d bytes and %d scales", len(x), len(q), len(d)))
	}
	currentImpl().quantQ8(q, d, x)
}

func quantQ8Generic(q []byte, d []uint16, x []float32) {
	for b := 0; b < len(x)/32; b++ {
		xs := x[b*32 : b*32+32]
		amax := absMax(xs)
		s, id := scale32(amax)
		d[b] = ggml.Float32ToHalf(s)
		for j, v := range xs {
			q[b*32+j] = byte(round8(v * id))
		}
	}
}

// quantKGeneric writes len(x)/256 blocks of 256 to dst.
func quantKGeneric(dst []byte, x []float32) {
	for b := 0; b < len(x)/256; b++ {
		xs := x[b*256 : b*256+256]
		blk := dst[b*actKBytes : b*actKBytes+actKBytes]
		d, id := scaleK(absMax(xs))
		binary.LittleEndian.PutUint32(blk, math.Float32bits(d))
		q := blk[actKQ : actKQ+256]
		for k := 0; k < 16; k++ {
			var s int32
			for j := 16 * k; j < 16*k+16; j++ {
				v := round8(xs[j] * id)
				q[j] = byte(v)
				s += int32(v)
			}
			binary.LittleEndian.PutUint16(blk[actKSum16+2*k:], uint16(int16(s)))
		}
		for k := 0; k < 8; k++ {
			s := int16(binary.LittleEndian.Uint16(blk[actKSum16+4*k:])) + int16(binary.LittleEndian.Uint16(blk[actKSum16+4*k+2:]))
			binary.LittleEndian.PutUint16(blk[actKSum32+2*k:], uint16(s))
		}
	}
}

// blockSums writes, in the spare word of each block of a quantised row, llama.cpp's Q8_1 sum
// s = half(d·Σq) as a float32, with d = amax/127 before its rounding to half precision; the
// kernels of Q4_1 and Q5_1 multiply it by the block's m.
func blockSums(row []byte, x []float32) {
	for b := 0; b < len(x)/32; b++ {
		g := row[b/4*act32Group:]
		k := b % 4
		qsum := -int32(binary.LittleEndian.Uint32(g[act32Corr+4*k:])) / 8
		d := absMax(x[b*32:b*32+32]) / 127
		s := ggml.HalfToFloat32(ggml.Float32ToHalf(d * float32(qsum)))
		binary.LittleEndian.PutUint32(g[act32Sum+4*k:], math.Float32bits(s))
	}
}
