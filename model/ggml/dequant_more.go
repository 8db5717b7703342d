package ggml

import "encoding/binary"

// IQ4Values are the 16 levels of the non-linear 4-bit types IQ4_NL and IQ4_XS: a quant q
// stands for d·IQ4Values[q].
var IQ4Values = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// Q4_1Ints decodes one Q4_1 block (half d, half m, 16 bytes of nibbles) into its quants 0…15:
// element i is d·q[i] + m. It returns d and m.
func Q4_1Ints(blk []byte, q *[32]int32) (d, m float32) {
	for j := 0; j < 16; j++ {
		q[j] = int32(blk[4+j] & 15)
		q[j+16] = int32(blk[4+j] >> 4)
	}
	return HalfToFloat32(binary.LittleEndian.Uint16(blk)), HalfToFloat32(binary.LittleEndian.Uint16(blk[2:]))
}

// Q5_0Ints decodes one Q5_0 block (half d, 32 high bits, 16 bytes of nibbles) into its quants
// −16…15: element i is d·q[i].
func Q5_0Ints(blk []byte, q *[32]int32) (d float32) {
	qh := binary.LittleEndian.Uint32(blk[2:])
	for j := 0; j < 16; j++ {
		q[j] = int32(blk[6+j]&15|byte(qh>>j&1)<<4) - 16
		q[j+16] = int32(blk[6+j]>>4|byte(qh>>(j+16)&1)<<4) - 16
	}
	return HalfToFloat32(binary.LittleEndian.Uint16(blk))
}

// Q5_1Ints decodes one Q5_1 block (half d, half m, 32 high bits, 16 bytes of nibbles) into
// its quants 0…31: element i is d·q[i] + m.
func Q5_1Ints(blk []byte, q *[32]int32) (d, m float32) {
	qh := binary.LittleEndian.Uint32(blk[4:])
	for j := 0; j < 16; j++ {
		q[j] = int32(blk[8+j]&15 | byte(qh>>j&1)<<4)
		q[j+16] = int32(blk[8+j]>>4 | byte(qh>>(j+16)&1)<<4)
	}
	return HalfToFloat32(binary.LittleEndian.Uint16(blk)), HalfToFloat32(binary.LittleEndian.Uint16(blk[2:]))
}

// IQ4_NLInts decodes one IQ4_NL block (half d, 16 bytes of nibbles) into its levels: element
// i is d·q[i].
func IQ4_NLInts(blk []byte, q *[32]int32) (d float32) {
	for j := 0; j < 16; j++ {
		q[j] = int32(IQ4Values[blk[2+j]&15])
		q[j+16] = int32(IQ4Values[blk[2+j]>>4])
	}
	return HalfToFloat32(binary.LittleEndian.Uint16(blk))
}

// KQuant is a decoded super-block of 256 elements of a K-quant or IQ4_XS type: element i is
// D·Scale[i/Sub]·Q[i] − Min·MinScale[i/Sub], with Sub elements per sub-block.
type KQuant struct {
	D, Min   float32
	Sub      int
	Scale    [16]int32
	MinScale [16]int32
	Q        [256]int32
}

// Q5_KInts decodes a Q5_K super-block (176 bytes): eight sub-blocks of 32 with 6-bit scales
// and mins, 5-bit quants.
func Q5_KInts(blk []byte, k *KQuant) {
	k.D = HalfToFloat32(binary.LittleEndian.Uint16(blk))
	k.Min = HalfToFloat32(binary.LittleEndian.Uint16(blk[2:]))
	k.Sub = 32
	for j := 0; j < 8; j++ {
		sc, mn := kScaleMin(j, blk[4:16])
		k.Scale[j], k.MinScale[j] = int32(sc), int32(mn)
	}
	qh := blk[16:48]
	qs := blk[48:176]
	for c := 0; c < 4; c++ {
		for l := 0; l < 32; l++ {
			k.Q[64*c+l] = int32(qs[32*c+l]&15 | (qh[l]>>(2*c)&1)<<4)
			k.Q[64*c+32+l] = int32(qs[32*c+l]>>4 | (qh[l]>>(2*c+1)&1)<<4)
		}
	}
}

// Q3_KInts decodes a Q3_K super-block (110 bytes): sixteen sub-blocks of 16 with signed 6-bit
// scales, 3-bit quants −4…3.
func Q3_KInts(blk []byte, k *KQuant) {
	hm := blk[0:32]
	qs := blk[32:96]
	sb := blk[96:108]
	k.D = HalfToFloat32(binary.LittleEndian.Uint16(blk[108:]))
	k.Min = 0
	k.Sub = 16
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	a0 := binary.LittleEndian.Uint32(sb[0:])
	a1 := binary.LittleEndian.Uint32(sb[4:])
	tmp := binary.LittleEndian.Uint32(sb[8:])
	aux := [4]uint32{
		a0&kmask2 | (tmp>>0&kmask1)<<4,
		a1&kmask2 | (tmp>>2&kmask1)<<4,
		a0>>4&kmask2 | (tmp>>4&kmask1)<<4,
		a1>>4&kmask2 | (tmp>>6&kmask1)<<4,
	}
	for i := 0; i < 16; i++ {
		k.Scale[i] = int32(int8(byte(aux[i/4]>>(8*(i%4))))) - 32
		k.MinScale[i] = 0
	}
	n := 0
	m := byte(1)
	for half := 0; half < 2; half++ {
		q := qs[32*half:]
		for shift := 0; shift < 8; shift += 2 {
			for l := 0; l < 32; l++ {
				v := int32(q[l] >> shift & 3)
				if hm[l]&m == 0 {
					v -= 4
				}
				k.Q[n+l] = v
			}
			n += 32
			m <<= 1
		}
	}
}

// Q2_KInts decodes a Q2_K super-block (84 bytes): sixteen sub-blocks of 16 with 4-bit scales
// and mins, 2-bit quants.
func Q2_KInts(blk []byte, k *KQuant) {
	sc := blk[0:16]
	qs := blk[16:80]
	k.D = HalfToFloat32(binary.LittleEndian.Uint16(blk[80:]))
	k.Min = HalfToFloat32(binary.LittleEndian.Uint16(blk[82:]))
	k.Sub = 16
	for i := 0; i < 16; i++ {
		k.Scale[i] = int32(sc[i] & 15)
		k.MinScale[i] = int32(sc[i] >> 4)
	}
	n := 0
	for half := 0; half < 2; half++ {
		q := qs[32*half:]
		for shift := 0; shift < 8; shift += 2 {
			for l := 0; l < 32; l++ {
				k.Q[n+l] = int32(q[l] >> shift & 3)
			}
			n += 32
		}
	}
}

// IQ4_XSInts decodes an IQ4_XS super-block (136 bytes): eight sub-blocks of 32 with 6-bit
// scales (minus 32) and non-linear 4-bit levels.
func IQ4_XSInts(blk []byte, k *KQuant) {
	k.D = HalfToFloat32(binary.LittleEndian.Uint16(blk))
	k.Min = 0
	k.Sub = 32
	sh := binary.LittleEndian.Uint16(blk[2:])
	sl := blk[4:8]
	qs := blk[8:136]
	for ib := 0; ib < 8; ib++ {
		ls := int32(sl[ib/2]>>(4*(ib%2))&15) | int32(sh>>(2*ib)&3)<<4
		k.Scale[ib] = ls - 32
		k.MinScale[ib] = 0
		for j := 0; j < 16; j++ {
			k.Q[32*ib+j] = int32(IQ4Values[qs[16*ib+j]&15])
			k.Q[32*ib+16+j] = int32(IQ4Values[qs[16*ib+j]>>4])
		}
	}
}

// dequantMore decodes the types of this file; it reports false for other types.
func dequantMore(t Type, src []byte, dst []float32) bool {
	var q [32]int32
	var k KQuant
	switch t {
	case Q4_1, Q5_0, Q5_1, IQ4_NL:
		size := map[Type]int{Q4_1: 20, Q5_0: 22, Q5_1: 24, IQ4_NL: 18}[t]
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*size : (b+1)*size]
			var d, m float32
			switch t {
			case Q4_1:
				d, m = Q4_1Ints(blk, &q)
			case Q5_0:
				d = Q5_0Ints(blk, &q)
			case Q5_1:
				d, m = Q5_1Ints(blk, &q)
			case IQ4_NL:
				d = IQ4_NLInts(blk, &q)
			}
			for i := 0; i < 32; i++ {
				dst[32*b+i] = d*float32(q[i]) + m
			}
		}
	case Q2_K, Q3_K, Q5_K, IQ4_XS:
		size := map[Type]int{Q2_K: 84, Q3_K: 110, Q5_K: 176, IQ4_XS: 136}[t]
		for b := 0; b < len(dst)/256; b++ {
			blk := src[b*size : (b+1)*size]
			switch t {
			case Q2_K:
				Q2_KInts(blk, &k)
			case Q3_K:
				Q3_KInts(blk, &k)
			case Q5_K:
				Q5_KInts(blk, &k)
			case IQ4_XS:
				IQ4_XSInts(blk, &k)
			}
			for i := 0; i < 256; i++ {
				s := i / k.Sub
				dst[256*b+i] = k.D*float32(k.Scale[s])*float32(k.Q[i]) - k.Min*float32(k.MinScale[s])
			}
		}
	default:
		return false
	}
	return true
}
