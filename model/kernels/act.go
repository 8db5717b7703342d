package kernels

import (
	"encoding/binary"
	"math"
)

// Quantised activation layouts, shared with the assembly (internal/asmgen):
//
//	block of 32 (Q8_0, Q4_0):  float32 d; int8 q[32]                               36 bytes
//	block of 256 (K-quants):   float32 d; int16 sum16[16]; int16 sum32[8]; int8 q[256]  308 bytes
//
// x ≈ d·q with d = max|x|/127 over the block; sum16[k] and sum32[k] are the sums of q over the
// k-th 16 and 32 elements.
const (
	act32Bytes = 36
	actKBytes  = 308
	actKSum16  = 4
	actKSum32  = 36
	actKQ      = 52
)

// blockScale returns the scale d of a block with largest magnitude amax and its inverse.
func blockScale(amax float32) (d, id float32) {
	if amax == 0 {
		return 0, 0
	}
	return amax / 127, 127 / amax
}

// round8 rounds v (|v| ≤ 127 plus rounding) half away from zero.
func round8(v float32) int8 {
	if v >= 0 {
		return int8(int32(v + 0.5))
	}
	return int8(int32(v - 0.5))
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

// quantize32 writes len(x)/32 blocks of 32 to dst.
func quantize32(dst []byte, x []float32) {
	for b := 0; b < len(x)/32; b++ {
		xs := x[b*32 : b*32+32]
		blk := dst[b*act32Bytes : b*act32Bytes+act32Bytes]
		d, id := blockScale(absMax(xs))
		binary.LittleEndian.PutUint32(blk, math.Float32bits(d))
		q := blk[4:36]
		for j, v := range xs {
			q[j] = byte(round8(v * id))
		}
	}
}

// quantizeK writes len(x)/256 blocks of 256 to dst.
func quantizeK(dst []byte, x []float32) {
	for b := 0; b < len(x)/256; b++ {
		xs := x[b*256 : b*256+256]
		blk := dst[b*actKBytes : b*actKBytes+actKBytes]
		d, id := blockScale(absMax(xs))
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
