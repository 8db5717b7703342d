package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// CanQuantize reports whether Quantize supports type t.
func CanQuantize(t Type) bool {
	switch t {
	case F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K:
		return true
	}
	return false
}

// Quantize encodes the values of src into dst in type t's block layout, the inverse of
// Dequantize: len(dst) must be t.RowBytes(len(src)), so len(src) must be a whole number of
// blocks. Supported types are F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K.
//
// The block quantisers choose their scales as follows, rounding values against the scales as
// stored (in half precision). Q8_0: d = max|x|/127, q = round(x/d).
// Q4_0: d = −m/8 where m is the value of largest magnitude, q = x/d + 8 rounded and clamped to
// 0…15. Q4_K: per sub-block of 32 an affine fit x ≈ s·q − m (q in 0…15, m ≥ 0) refined by least
// squares over the chosen q, then s and m quantised to 6 bits against the super-block's
// largest. Q6_K: per sub-block of 16 a scale max|x|/31, quantised to 8 bits against the
// super-block's largest, q = x/scale rounded and clamped to −32…31.
func Quantize(t Type, src []float32, dst []byte) error {
	if !CanQuantize(t) {
		return fmt.Errorf("quantize %s: unsupported tensor type", t)
	}
	n, err := t.RowBytes(len(src))
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	if n != len(dst) {
		return fmt.Errorf("quantize %s: %d elements take %d bytes, got %d", t, len(src), n, len(dst))
	}
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToHalf(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/32; b++ {
			quantQ8_0(src[32*b:32*b+32], dst[34*b:34*b+34])
		}
	case Q4_0:
		for b := 0; b < len(src)/32; b++ {
			quantQ4_0(src[32*b:32*b+32], dst[18*b:18*b+18])
		}
	case Q4_K:
		for b := 0; b < len(src)/256; b++ {
			quantQ4_K(src[256*b:256*b+256], dst[144*b:144*b+144])
		}
	case Q6_K:
		for b := 0; b < len(src)/256; b++ {
			quantQ6_K(src[256*b:256*b+256], dst[210*b:210*b+210])
		}
	}
	return nil
}

// roundHalfAway rounds to the nearest integer, halves away from zero (C's roundf).
func roundHalfAway(v float32) int {
	return int(math.Round(float64(v)))
}

func storeHalf(b []byte, f float32) { binary.LittleEndian.PutUint16(b, Float32ToHalf(f)) }

func quantQ8_0(x []float32, blk []byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := HalfToFloat32(Float32ToHalf(amax / 127)) // the scale as stored
	var id float32
	if d != 0 {
		id = 1 / d
	}
	storeHalf(blk, d)
	for i, v := range x {
		blk[2+i] = byte(int8(min(127, max(-127, roundHalfAway(v*id)))))
	}
}

func quantQ4_0(x []float32, blk []byte) {
	var m, amax float32 // the value of largest magnitude, with its sign
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, m = a, v
		}
	}
	d := HalfToFloat32(Float32ToHalf(m / -8))
	var id float32
	if d != 0 {
		id = 1 / d
	}
	storeHalf(blk, d)
	q := func(v float32) byte {
		return byte(min(15, max(0, int(v*id+8.5))))
	}
	for j := range 16 {
		blk[2+j] = q(x[j]) | q(x[j+16])<<4
	}
}

func abs32(v float32) float32 { return float32(math.Abs(float64(v))) }

// fitAffine4 fits x ≈ s·q − m with q in 0…15 and m ≥ 0, starting from the range of x and
// refining (s, m) by least squares over the chosen q a few times. It returns s and m.
func fitAffine4(x []float32) (s, m float32) {
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	lo = min(lo, 0)
	if hi == lo {
		return 0, -lo
	}
	s, m = (hi-lo)/15, -lo
	bestErr := math.Inf(1)
	bestS, bestM := s, m
	for iter := 0; iter < 4; iter++ {
		// Quantise with the current fit and measure it.
		var sq, sqq, sx, sxq, errSum float64
		n := float64(len(x))
		for _, v := range x {
			q := float64(min(15, max(0, roundHalfAway((v+m)/s))))
			e := float64(s)*q - float64(m) - float64(v)
			errSum += e * e
			sq += q
			sqq += q * q
			sx += float64(v)
			sxq += float64(v) * q
		}
		if errSum < bestErr {
			bestErr, bestS, bestM = errSum, s, m
		}
		// Least squares for x ≈ s·q − m over these q.
		det := n*sqq - sq*sq
		if det <= 0 {
			break
		}
		ns := (n*sxq - sq*sx) / det
		nm := (ns*sq - sx) / n
		if nm < 0 { // m must stay ≥ 0: refit s alone with m = 0
			nm = 0
			if sqq > 0 {
				ns = sxq / sqq
			}
		}
		if ns <= 0 {
			break
		}
		s, m = float32(ns), float32(nm)
	}
	return bestS, bestM
}

func quantQ4_K(x []float32, blk []byte) {
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		scales[j], mins[j] = fitAffine4(x[32*j : 32*j+32])
		maxScale = max(maxScale, scales[j])
		maxMin = max(maxMin, mins[j])
	}
	d, dmin := maxScale/63, maxMin/63
	// The stored (rounded) super-scales are the ones dequantisation uses.
	d = HalfToFloat32(Float32ToHalf(d))
	dmin = HalfToFloat32(Float32ToHalf(dmin))
	storeHalf(blk, d)
	storeHalf(blk[2:], dmin)
	var ls, lm [8]uint8
	for j := range 8 {
		if d > 0 {
			ls[j] = uint8(min(63, roundHalfAway(scales[j]/d)))
		}
		if dmin > 0 {
			lm[j] = uint8(min(63, roundHalfAway(mins[j]/dmin)))
		}
	}
	sc := blk[4:16]
	for j := range 4 {
		sc[j] = ls[j] | (ls[j+4]>>4)<<6
		sc[j+4] = lm[j] | (lm[j+4]>>4)<<6
		sc[j+8] = ls[j+4]&0x0f | (lm[j+4]&0x0f)<<4
	}
	var q [256]uint8
	for j := range 8 {
		s := d * float32(ls[j])
		m := dmin * float32(lm[j])
		for i := 32 * j; i < 32*j+32; i++ {
			if s > 0 {
				q[i] = uint8(min(15, max(0, roundHalfAway((x[i]+m)/s))))
			}
		}
	}
	qs := blk[16:144]
	for g := range 4 {
		for l := range 32 {
			qs[32*g+l] = q[64*g+l] | q[64*g+32+l]<<4
		}
	}
}

func quantQ6_K(x []float32, blk []byte) {
	var scales [16]float32
	var amax float32
	for j := range 16 {
		var m float32
		for _, v := range x[16*j : 16*j+16] {
			m = max(m, abs32(v))
		}
		scales[j] = m / 31
		amax = max(amax, scales[j])
	}
	d := HalfToFloat32(Float32ToHalf(amax / 127))
	var ls [16]int8
	for j := range 16 {
		if d > 0 {
			ls[j] = int8(min(127, roundHalfAway(scales[j]/d)))
		}
	}
	var q [256]uint8 // q + 32, in 0…63
	for i := range 256 {
		s := d * float32(ls[i/16])
		v := 0
		if s > 0 {
			v = min(31, max(-32, roundHalfAway(x[i]/s)))
		}
		q[i] = uint8(v + 32)
	}
	ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
	for j := range 16 {
		sc[j] = byte(ls[j])
	}
	storeHalf(blk[208:], d)
	for h := range 2 {
		ql := ql[64*h : 64*h+64]
		qh := qh[32*h : 32*h+32]
		e := q[128*h : 128*h+128]
		for l := range 32 {
			ql[l] = e[l]&0x0f | (e[l+64]&0x0f)<<4
			ql[l+32] = e[l+32]&0x0f | (e[l+96]&0x0f)<<4
			qh[l] = e[l]>>4 | (e[l+32]>>4)<<2 | (e[l+64]>>4)<<4 | (e[l+96]>>4)<<6
		}
	}
}
