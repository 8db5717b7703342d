package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomlm/loom/model/ggml"
)

// This file checks the 8-bit activations against llama.cpp's semantics, written out here from
// their definition (llama.cpp's x86 quantize_row_q8_0 and quantize_row_q8_K), independently of
// act.go: per block amax = max|x|; q = round(x·(127/amax)) with float32 arithmetic, to nearest,
// ties to even; for blocks of 32 the scale is amax/127 rounded to IEEE half precision (to
// nearest, ties to even), for blocks of 256 the float32 1/(127/amax). The products are then
// Σ_blocks (d_w·d_x)·Σ q_w·q_x, which the tests compute in float64 around the exact integer sums.

// refToHalf rounds v to the nearest IEEE binary16 value, ties to even, from the format's
// definition (10 fraction bits; exponents from −14, below which the spacing stays 2^-24),
// returning it as float64. Values beyond the largest half become infinities.
func refToHalf(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	_, e := math.Frexp(math.Abs(v)) // |v| = f·2^e, f in [0.5, 1)
	e = max(e-1, -14)               // exponent of the leading bit, clamped to the subnormal range
	quantum := math.Ldexp(1, e-10)
	h := math.RoundToEven(v/quantum) * quantum
	if math.Abs(h) > 65504 {
		return math.Copysign(math.Inf(1), v)
	}
	return h
}

// refQuant32 returns llama.cpp's Q8_0 activation block of x (32 values): the half-precision
// scale and the quants.
func refQuant32(x []float32) (d float64, q [32]int) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax == 0 {
		return 0, q
	}
	d = refToHalf(float64(amax / 127))
	id := 127 / amax
	for j, v := range x {
		q[j] = int(math.RoundToEven(float64(v * id)))
	}
	return d, q
}

// refQuantK returns llama.cpp's Q8_K activation block of x (256 values).
func refQuantK(x []float32) (d float32, q [256]int) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax == 0 {
		return 0, q
	}
	id := 127 / amax
	for j, v := range x {
		q[j] = int(math.RoundToEven(float64(v * id)))
	}
	return 1 / id, q
}

// quantCases are activation rows that reach the corners of the quantisation: random values,
// exact ties (amax 127 makes 127/amax exactly 1), scales that are subnormal in half precision,
// scales exactly halfway between two halves, a zero block and one large value.
func quantCases(r *rand.Rand, cols int) map[string][]float32 {
	cases := map[string][]float32{}
	add := func(name string, f func(i int) float32) {
		x := make([]float32, cols)
		for i := range x {
			x[i] = f(i)
		}
		cases[name] = x
	}
	add("normal", func(int) float32 { return float32(r.NormFloat64()) })
	add("ties", func(i int) float32 {
		if i%32 == 0 {
			return 127
		}
		return float32(i%32-16) + 0.5 // every other value ends in .5
	})
	add("tiny", func(int) float32 { return float32(r.NormFloat64() * 1e-4) }) // d ≈ 3e-6: subnormal half
	add("half-ties", func(i int) float32 {
		if i%32 == 0 { // amax/127 = 1 + (2k+1)·2^-11 exactly: halfway between two halves
			return 127 * (1 + float32(2*(i/32%8)+1)*0x1p-11)
		}
		return float32(r.Float64()*2 - 1)
	})
	add("zero-block", func(i int) float32 {
		if i < 32 {
			return 0
		}
		return float32(r.NormFloat64())
	})
	add("spike", func(i int) float32 {
		if i == 5 {
			return 3e4
		}
		return float32(r.NormFloat64())
	})
	return cases
}

// TestQuantizeLikeLlamaCpp checks the bytes of every implementation's activation quantisers
// against the reference semantics.
func TestQuantizeLikeLlamaCpp(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 7))
	for _, cols := range []int{32, 256, 512, 800} {
		for name, x := range quantCases(r, cols) {
			for _, im := range impls {
				a := make([]byte, act32Bytes(cols))
				im.quant32(a, x)
				for b := 0; b < cols/32; b++ {
					wantD, wantQ := refQuant32(x[32*b : 32*b+32])
					d, corr, q := act32Block(a, b)
					sum := 0
					for j := range 32 {
						sum += wantQ[j]
						if int(int8(q[j])) != wantQ[j] {
							t.Fatalf("%s quant32 %s/%d block %d: q[%d] = %d, want %d (x = %g)", im.name, name, cols, b, j, int8(q[j]), wantQ[j], x[32*b+j])
						}
					}
					if float64(d) != wantD {
						t.Fatalf("%s quant32 %s/%d block %d: scale %g, want %g", im.name, name, cols, b, d, wantD)
					}
					if int(corr) != -8*sum {
						t.Fatalf("%s quant32 %s/%d block %d: Q4_0 correction %d, want %d", im.name, name, cols, b, corr, -8*sum)
					}
				}
				if cols%256 != 0 {
					continue
				}
				k := make([]byte, cols/256*actKBytes)
				im.quantK(k, x)
				for b := 0; b < cols/256; b++ {
					wantD, wantQ := refQuantK(x[256*b : 256*b+256])
					blk := k[b*actKBytes:]
					if d := lef32(blk); d != wantD {
						t.Fatalf("%s quantK %s/%d block %d: scale %g, want %g", im.name, name, cols, b, d, wantD)
					}
					for j := range 256 {
						if int(int8(blk[actKQ+j])) != wantQ[j] {
							t.Fatalf("%s quantK %s/%d block %d: q[%d] = %d, want %d", im.name, name, cols, b, j, int8(blk[actKQ+j]), wantQ[j])
						}
					}
					for s := range 16 {
						sum := 0
						for j := 16 * s; j < 16*s+16; j++ {
							sum += wantQ[j]
						}
						if got := int(int16(binary.LittleEndian.Uint16(blk[actKSum16+2*s:]))); got != sum {
							t.Fatalf("%s quantK %s/%d block %d: sum16[%d] = %d, want %d", im.name, name, cols, b, s, got, sum)
						}
					}
				}
			}
		}
	}
}

// TestRefToHalf checks the reference rounding to half precision against the format's
// landmarks and against every half value and the midpoints between neighbours.
func TestRefToHalf(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{1, 1}, {65504, 65504}, {65520, math.Inf(1)}, {0x1p-24, 0x1p-24}, {0x1p-25, 0},
		{0x1.8p-25, 0x1p-24}, {1 + 0x1p-11, 1}, {1 + 0x3p-11, 1 + 0x1p-9}, {-2049, -2048},
	} {
		if got := refToHalf(tc.in); got != tc.want {
			t.Errorf("refToHalf(%g) = %g, want %g", tc.in, got, tc.want)
		}
	}
	for h := uint16(0); h < 0x7bff; h++ {
		v, next := refHalf(h), refHalf(h+1)
		if got := refToHalf(v); got != v {
			t.Fatalf("refToHalf(%g) = %g, want itself", v, got)
		}
		mid := (v + next) / 2
		want := v
		if h&1 == 1 { // ties go to the even neighbour
			want = next
		}
		if got := refToHalf(mid); got != want {
			t.Fatalf("refToHalf(%g) = %g, want %g", mid, got, want)
		}
	}
}

// refDot32 returns llama.cpp's product of weight row w (Q8_0 or Q4_0 blocks) with activation
// row x: Σ_b (d_w·d_x)·Σ q_w·q_x, each block term rounded to float32 as llama.cpp rounds it
// (float32 d_w·d_x times the float32 of the integer sum), the terms summed in float64; and
// the sum of their magnitudes.
func refDot32(t ggml.Type, w []byte, x []float32) (sum, abs float64) {
	for b := 0; b < len(x)/32; b++ {
		dx, qx := refQuant32(x[32*b : 32*b+32])
		var dw float32
		var qw [32]int
		switch t {
		case ggml.Q8_0:
			blk := w[34*b:]
			dw = ggml.HalfToFloat32(binary.LittleEndian.Uint16(blk))
			for j := range 32 {
				qw[j] = int(int8(blk[2+j]))
			}
		case ggml.Q4_0:
			blk := w[18*b:]
			dw = ggml.HalfToFloat32(binary.LittleEndian.Uint16(blk))
			for j := range 16 {
				qw[j], qw[j+16] = int(blk[2+j]&15)-8, int(blk[2+j]>>4)-8
			}
		}
		isum := 0
		for j := range 32 {
			isum += qw[j] * qx[j]
		}
		term := float64(float32(dw*float32(dx)) * float32(isum))
		sum += term
		abs += math.Abs(term)
	}
	return sum, abs
}

// TestMatMulLikeLlamaCpp checks Q8_0 and Q4_0 products, every implementation and batch size,
// against llama.cpp's arithmetic: with the same 8-bit activations and scales, the results may
// differ only by the order of the float32 additions of the block terms.
func TestMatMulLikeLlamaCpp(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 17))
	for _, typ := range []ggml.Type{ggml.Q8_0, ggml.Q4_0} {
		for _, sh := range []struct{ rows, cols int }{{7, 32}, {9, 96}, {33, 512}, {300, 800}} {
			m := randomMatrix(r, typ, sh.rows, sh.cols)
			rb := m.RowBytes()
			for name, x1 := range quantCases(r, sh.cols) {
				const n = 5
				x := make([]float32, 0, n*sh.cols)
				for range n {
					x = append(x, x1...)
				}
				for _, im := range implNames() {
					out := make([]float32, n*sh.rows)
					withImpl(t, im, func() { MatMul(out, m, x, n) })
					for row := 0; row < sh.rows; row++ {
						want, abs := refDot32(typ, m.Data[row*rb:(row+1)*rb], x1)
						// Float32 sums of cols/32 terms (the AVX-512 kernel sums partial
						// products per lane, which may cancel: a margin of 8).
						tol := abs*float64(sh.cols/32)*0x1p-21 + 1e-30
						for i := range n {
							if got := float64(out[i*sh.rows+row]); math.Abs(got-want) > tol {
								t.Fatalf("%v %d×%d %s, %s, row %d, batch row %d: %g, want %g ± %.3g", typ, sh.rows, sh.cols, name, im, row, i, got, want, tol)
							}
						}
					}
				}
			}
		}
	}
}
