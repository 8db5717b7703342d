package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// CanDequantize reports whether Dequantize supports type t.
func CanDequantize(t Type) bool {
	switch t {
	case F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS:
		return true
	}
	return false
}

// Dequantize decodes the elements stored in src, of type t, into dst, which must hold exactly
// as many elements as src stores (len(src) = t.RowBytes(len(dst))). Supported types are F32,
// F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS;
// any other type is an error naming it.
func Dequantize(t Type, src []byte, dst []float32) error {
	if !CanDequantize(t) {
		return fmt.Errorf("dequantize %s: unsupported tensor type", t)
	}
	n, err := t.RowBytes(len(dst))
	if err != nil {
		return fmt.Errorf("dequantize: %w", err)
	}
	if n != len(src) {
		return fmt.Errorf("dequantize %s: %d elements take %d bytes, got %d", t, len(dst), n, len(src))
	}
	if dequantMore(t, src, dst) {
		return nil
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = HalfToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			dequantQ8_0(src[b*34:b*34+34], dst[b*32:b*32+32])
		}
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			dequantQ4_0(src[b*18:b*18+18], dst[b*32:b*32+32])
		}
	case Q4_K:
		for b := 0; b < len(dst)/256; b++ {
			dequantQ4_K(src[b*144:b*144+144], dst[b*256:b*256+256])
		}
	case Q6_K:
		for b := 0; b < len(dst)/256; b++ {
			dequantQ6_K(src[b*210:b*210+210], dst[b*256:b*256+256])
		}
	}
	return nil
}

// dequantQ8_0 decodes one Q8_0 block: a half-precision scale d, then 32 signed bytes q;
// element i is d·q[i].
func dequantQ8_0(blk []byte, dst []float32) {
	d := HalfToFloat32(binary.LittleEndian.Uint16(blk))
	q := blk[2:34]
	for i := range 32 {
		dst[i] = d * float32(int8(q[i]))
	}
}

// dequantQ4_0 decodes one Q4_0 block: a half-precision scale d, then 16 bytes of 4-bit
// values. Byte j holds element j in its low nibble and element j+16 in its high nibble;
// element i is d·(nibble − 8).
func dequantQ4_0(blk []byte, dst []float32) {
	d := HalfToFloat32(binary.LittleEndian.Uint16(blk))
	q := blk[2:18]
	for j := range 16 {
		dst[j] = d * float32(int(q[j]&0x0f)-8)
		dst[j+16] = d * float32(int(q[j]>>4)-8)
	}
}

// kScaleMin returns the 6-bit scale and min of sub-block j (0–7) of a Q4_K block from its 12
// packed bytes: sub-blocks 0–3 keep theirs in the low 6 bits of bytes j (scale) and j+4 (min);
// sub-blocks 4–7 take their low 4 bits from byte j+4 (scale low nibble, min high nibble) and
// their top 2 bits from the spare top bits of bytes j−4 (scale) and j (min).
func kScaleMin(j int, s []byte) (scale, min uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	scale = s[j+4]&0x0f | (s[j-4]>>6)<<4
	min = s[j+4]>>4 | (s[j]>>6)<<4
	return scale, min
}

// dequantQ4_K decodes one Q4_K super-block of 256 elements: half-precision d and dmin, 12 bytes
// of packed 6-bit scales and mins for 8 sub-blocks of 32, then 128 bytes of 4-bit values.
// Each 32-byte group of values serves two sub-blocks: low nibbles the first, high nibbles the
// second. Element = d·scale·q − dmin·min.
func dequantQ4_K(blk []byte, dst []float32) {
	d := HalfToFloat32(binary.LittleEndian.Uint16(blk))
	dmin := HalfToFloat32(binary.LittleEndian.Uint16(blk[2:]))
	scales := blk[4:16]
	q := blk[16:144]
	for g := range 4 {
		sc1, m1 := kScaleMin(2*g, scales)
		sc2, m2 := kScaleMin(2*g+1, scales)
		d1, o1 := d*float32(sc1), dmin*float32(m1)
		d2, o2 := d*float32(sc2), dmin*float32(m2)
		qs := q[32*g : 32*g+32]
		out := dst[64*g : 64*g+64]
		for l := range 32 {
			out[l] = d1*float32(qs[l]&0x0f) - o1
			out[l+32] = d2*float32(qs[l]>>4) - o2
		}
	}
}

// dequantQ6_K decodes one Q6_K super-block of 256 elements: 128 bytes of low 4 bits (ql), 64
// bytes of high 2 bits (qh), 16 signed 8-bit scales (one per 16 elements) and a half-precision
// d. Each half of 128 elements uses 64 bytes of ql and 32 of qh: for l in 0–31, ql[l] holds
// elements l (low nibble) and l+64 (high nibble), ql[l+32] holds l+32 and l+96, and qh[l] holds
// the top bits of l, l+32, l+64, l+96 in bit pairs 0, 2, 4, 6. Element = d·scale·(q − 32).
func dequantQ6_K(blk []byte, dst []float32) {
	ql := blk[0:128]
	qh := blk[128:192]
	sc := blk[192:208]
	d := HalfToFloat32(binary.LittleEndian.Uint16(blk[208:]))
	for h := range 2 {
		ql := ql[64*h : 64*h+64]
		qh := qh[32*h : 32*h+32]
		sc := sc[8*h : 8*h+8]
		out := dst[128*h : 128*h+128]
		for l := range 32 {
			is := l / 16
			q1 := int(ql[l]&0x0f|(qh[l]&3)<<4) - 32
			q2 := int(ql[l+32]&0x0f|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			out[l] = d * float32(int8(sc[is])) * float32(q1)
			out[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			out[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			out[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
	}
}
