package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/loomlm/loom/model/ggml"
)

// dotFunc is the signature every dot kernel shares, assembly or Go. For r in [0, rows) and i in
// [0, nx) it sets out[i*ostride + r] to the dot product of the weight row at w + r*wstride with
// the activation row at x + i*xstride (both in bytes). n counts kernel blocks: 8 elements for
// the float types, 32 for Q8_0 and Q4_0, 256 for the K-quants; x holds raw float32 for the float
// types and quantised activation blocks (act.go) for the others.
type dotFunc func(w *byte, wstride, rows, n int, x *byte, xstride int, out *float32, ostride int)

// bytesAt returns the n bytes at p + off.
func bytesAt(p *byte, off, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(p), off)), n)
}

func floatAt(p *float32, off int) *float32 {
	return (*float32)(unsafe.Add(unsafe.Pointer(p), 4*off))
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func lef32(b []byte) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}

// genericDot builds the pure-Go kernel for nx activation rows from a one-row dot product over
// the weight row wr and activation row xr.
func genericDot(nx, wBlock, xBlock int, dot func(wr, xr []byte) float32) dotFunc {
	return func(w *byte, wstride, rows, n int, x *byte, xstride int, out *float32, ostride int) {
		for r := 0; r < rows; r++ {
			wr := bytesAt(w, r*wstride, n*wBlock)
			for i := 0; i < nx; i++ {
				xr := bytesAt(x, i*xstride, n*xBlock)
				*floatAt(out, i*ostride+r) = dot(wr, xr)
			}
		}
	}
}

func genericKernels(wBlock, xBlock int, dot func(wr, xr []byte) float32) [4]dotFunc {
	var k [4]dotFunc
	for nx := 1; nx <= 4; nx++ {
		k[nx-1] = genericDot(nx, wBlock, xBlock, dot)
	}
	return k
}

// genericFloat builds the pure-Go kernel of a float type: each weight row is decoded once into
// float32 and then multiplied with the nx activation rows.
func genericFloat(nx, elemBytes int, decode func(dst []float32, src []byte)) dotFunc {
	return func(w *byte, wstride, rows, n int, x *byte, xstride int, out *float32, ostride int) {
		cols := 8 * n
		row := make([]float32, cols)
		xs := make([][]float32, nx)
		for i := range xs {
			xs[i] = unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(x), i*xstride)), cols)
		}
		for r := 0; r < rows; r++ {
			decode(row, bytesAt(w, r*wstride, cols*elemBytes))
			for i := 0; i < nx; i++ {
				*floatAt(out, i*ostride+r) = dotFloat(row, xs[i])
			}
		}
	}
}

func genericFloatKernels(elemBytes int, decode func(dst []float32, src []byte)) [4]dotFunc {
	var k [4]dotFunc
	for nx := 1; nx <= 4; nx++ {
		k[nx-1] = genericFloat(nx, elemBytes, decode)
	}
	return k
}

// dotFloat returns Σ a[i]·b[i] over len(a) (a multiple of 8) with four partial sums.
func dotFloat(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	b = b[:len(a)]
	for i := 0; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	return (s0 + s1) + (s2 + s3)
}

func decodeF32(dst []float32, src []byte) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = lef32(src[4*i:])
	}
}

func decodeF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	t := halfTable()
	for i := range dst {
		dst[i] = t[le16(src[2*i:])]
	}
}

func decodeBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = ggml.BF16ToFloat32(le16(src[2*i:]))
	}
}

// dotBlocksQ8_0 returns the dot product over blocks [b0, b1) of a Q8_0 weight row and a
// quantised activation row.
func dotBlocksQ8_0(wr, xr []byte, b0, b1 int) float32 {
	var sum float32
	for b := b0; b < b1; b++ {
		wb := wr[b*34 : b*34+34]
		xd, _, q := act32Block(xr, b)
		var s int32
		for j := 0; j < 32; j++ {
			s += int32(int8(wb[2+j])) * int32(int8(q[j]))
		}
		sum += float32(s) * (ggml.HalfToFloat32(le16(wb)) * xd)
	}
	return sum
}

// dotBlocksQ4_0 is dotBlocksQ8_0 for Q4_0.
func dotBlocksQ4_0(wr, xr []byte, b0, b1 int) float32 {
	var sum float32
	for b := b0; b < b1; b++ {
		wb := wr[b*18 : b*18+18]
		xd, corr, q := act32Block(xr, b)
		s := corr
		for j := 0; j < 16; j++ {
			s += int32(wb[2+j]&15) * int32(int8(q[j]))
			s += int32(wb[2+j]>>4) * int32(int8(q[j+16]))
		}
		sum += float32(s) * (ggml.HalfToFloat32(le16(wb)) * xd)
	}
	return sum
}

// blocks32 are the Go block loops of the types whose kernels work on groups of four blocks.
var blocks32 = map[kind]func(wr, xr []byte, b0, b1 int) float32{kQ8_0: dotBlocksQ8_0, kQ4_0: dotBlocksQ4_0,
	kQ4_1: dotBlocks32(kQ4_1), kQ5_0: dotBlocks32(kQ5_0), kQ5_1: dotBlocks32(kQ5_1), kIQ4_NL: dotBlocks32(kIQ4_NL)}

// q4KScales unpacks the eight 6-bit scales and mins of a Q4_K super-block.
func q4KScales(p []byte) (sc, mn [8]int32) {
	for j := 0; j < 4; j++ {
		sc[j] = int32(p[j] & 63)
		mn[j] = int32(p[j+4] & 63)
		sc[j+4] = int32(p[j+8]&15 | (p[j]>>6)<<4)
		mn[j+4] = int32(p[j+8]>>4 | (p[j+4]>>6)<<4)
	}
	return sc, mn
}

func dotRowQ4_K(wr, xr []byte) float32 {
	var sum float32
	for b := 0; b < len(wr)/144; b++ {
		wb := wr[b*144 : b*144+144]
		xb := xr[b*actKBytes : b*actKBytes+actKBytes]
		sc, mn := q4KScales(wb[4:16])
		q := xb[actKQ : actKQ+256]
		var s, m int32
		for c := 0; c < 4; c++ {
			qs := wb[16+32*c : 48+32*c]
			var lo, hi int32
			for l := 0; l < 32; l++ {
				lo += int32(qs[l]&15) * int32(int8(q[64*c+l]))
				hi += int32(qs[l]>>4) * int32(int8(q[64*c+32+l]))
			}
			s += sc[2*c]*lo + sc[2*c+1]*hi
		}
		for k := 0; k < 8; k++ {
			m += mn[k] * int32(int16(le16(xb[actKSum32+2*k:])))
		}
		xd := lef32(xb)
		sum += float32(s)*(ggml.HalfToFloat32(le16(wb))*xd) - float32(m)*(ggml.HalfToFloat32(le16(wb[2:]))*xd)
	}
	return sum
}

func dotRowQ6_K(wr, xr []byte) float32 {
	var sum float32
	for b := 0; b < len(wr)/210; b++ {
		wb := wr[b*210 : b*210+210]
		xb := xr[b*actKBytes : b*actKBytes+actKBytes]
		q := xb[actKQ : actKQ+256]
		var s int32
		for h := 0; h < 2; h++ {
			ql := wb[64*h : 64*h+64]
			qh := wb[128+32*h : 160+32*h]
			sc := wb[192+8*h : 200+8*h]
			x := q[128*h : 128*h+128]
			var g [8]int32 // per 16-element sub-block
			for l := 0; l < 32; l++ {
				k := l / 16
				g[k] += int32(ql[l]&15|(qh[l]&3)<<4) * int32(int8(x[l]))
				g[k+2] += int32(ql[l+32]&15|(qh[l]>>2&3)<<4) * int32(int8(x[l+32]))
				g[k+4] += int32(ql[l]>>4|(qh[l]>>4&3)<<4) * int32(int8(x[l+64]))
				g[k+6] += int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) * int32(int8(x[l+96]))
			}
			for k := 0; k < 8; k++ {
				sum16 := int32(int16(le16(xb[actKSum16+2*(8*h+k):])))
				s += int32(int8(sc[k])) * (g[k] - 32*sum16)
			}
		}
		sum += float32(s) * (ggml.HalfToFloat32(le16(wb[208:])) * lef32(xb))
	}
	return sum
}

func axpyGeneric(a float32, x, y *float32, n int) {
	xs := unsafe.Slice(x, n)
	ys := unsafe.Slice(y, n)
	for i, v := range xs {
		ys[i] += a * v
	}
}

var genericImpl = impl{
	name: "generic",
	dot: [numKinds][4]dotFunc{
		kF32:    genericFloatKernels(4, decodeF32),
		kF16:    genericFloatKernels(2, decodeF16),
		kBF16:   genericFloatKernels(2, decodeBF16),
		kQ8_0:   genericKernels(4*34, act32Group, func(wr, xr []byte) float32 { return dotBlocksQ8_0(wr, xr, 0, len(wr)/34) }),
		kQ4_0:   genericKernels(4*18, act32Group, func(wr, xr []byte) float32 { return dotBlocksQ4_0(wr, xr, 0, len(wr)/18) }),
		kQ4_K:   genericKernels(144, actKBytes, dotRowQ4_K),
		kQ6_K:   genericKernels(210, actKBytes, dotRowQ6_K),
		kQ4_1:   genericKernels32(kQ4_1),
		kQ5_0:   genericKernels32(kQ5_0),
		kQ5_1:   genericKernels32(kQ5_1),
		kIQ4_NL: genericKernels32(kIQ4_NL),
		kQ2_K:   genericKernels(84, actKBytes, dotRowK(kQ2_K)),
		kQ3_K:   genericKernels(110, actKBytes, dotRowK(kQ3_K)),
		kQ5_K:   genericKernels(176, actKBytes, dotRowK(kQ5_K)),
		kIQ4_XS: genericKernels(136, actKBytes, dotRowK(kIQ4_XS)),
	},
	axpy:    axpyGeneric,
	quant32: quant32Generic,
	quantK:  quantKGeneric,
	quantQ8: quantQ8Generic,
}

// genericPackedImpl holds the pure-Go kernels of packed matrices. The generic implementation has
// no packed kernels of its own, so Pack leaves matrices as they are under it; these compute
// the products of matrices packed under an assembly implementation after a switch to the
// generic one (SetGeneric, tests).
var genericPackedImpl = [numKinds][4]packedFunc{
	kQ4_0:   genericPackedKernels(ggml.Q4_0),
	kQ8_0:   genericPackedKernels(ggml.Q8_0),
	kIQ4_NL: genericPackedKernels(ggml.IQ4_NL),
}
