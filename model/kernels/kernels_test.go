package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/loomlm/loom/model/ggml"
)

var testTypes = []ggml.Type{ggml.F32, ggml.F16, ggml.BF16, ggml.Q8_0, ggml.Q4_0, ggml.Q4_K, ggml.Q6_K,
	ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.IQ4_NL, ggml.Q2_K, ggml.Q3_K, ggml.Q5_K, ggml.IQ4_XS}

// randHalf returns a random positive binary16 bit pattern with a value in [2^(lo-15), 2^(hi-14)).
func randHalf(r *rand.Rand, lo, hi int) uint16 {
	exp := lo + r.IntN(hi-lo+1)
	return uint16(exp)<<10 | uint16(r.IntN(1024))
}

// randomMatrix fills a rows×cols matrix of type t with random bytes that form valid blocks.
// Scales are moderate; quants cover their whole range, including the extremes.
func randomMatrix(r *rand.Rand, t ggml.Type, rows, cols int) Matrix {
	rb, err := t.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	data := make([]byte, rows*rb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	put16 := func(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }
	switch t {
	case ggml.F32:
		for i := 0; i < len(data); i += 4 {
			binary.LittleEndian.PutUint32(data[i:], math.Float32bits(float32(r.NormFloat64())))
		}
	case ggml.F16:
		for i := 0; i < len(data); i += 2 {
			put16(data[i:], randHalf(r, 8, 16)|uint16(r.IntN(2))<<15)
		}
	case ggml.BF16:
		for i := 0; i < len(data); i += 2 {
			put16(data[i:], uint16(120+r.IntN(8))<<7|uint16(r.IntN(128))|uint16(r.IntN(2))<<15)
		}
	case ggml.Q8_0:
		for b := 0; b < len(data); b += 34 {
			put16(data[b:], randHalf(r, 5, 12))
		}
	case ggml.Q4_0:
		for b := 0; b < len(data); b += 18 {
			put16(data[b:], randHalf(r, 5, 12))
		}
	case ggml.Q4_K:
		for b := 0; b < len(data); b += 144 {
			put16(data[b:], randHalf(r, 5, 10))
			put16(data[b+2:], randHalf(r, 5, 10))
		}
	case ggml.Q6_K:
		for b := 0; b < len(data); b += 210 {
			put16(data[b+208:], randHalf(r, 5, 10))
		}
	case ggml.Q4_1, ggml.Q5_1: // d and m
		size := map[ggml.Type]int{ggml.Q4_1: 20, ggml.Q5_1: 24}[t]
		for b := 0; b < len(data); b += size {
			put16(data[b:], randHalf(r, 5, 12))
			put16(data[b+2:], randHalf(r, 5, 12)|uint16(r.IntN(2))<<15)
		}
	case ggml.Q5_0, ggml.IQ4_NL:
		size := map[ggml.Type]int{ggml.Q5_0: 22, ggml.IQ4_NL: 18}[t]
		for b := 0; b < len(data); b += size {
			put16(data[b:], randHalf(r, 5, 12))
		}
	case ggml.Q2_K:
		for b := 0; b < len(data); b += 84 {
			put16(data[b+80:], randHalf(r, 5, 10))
			put16(data[b+82:], randHalf(r, 5, 10))
		}
	case ggml.Q3_K:
		for b := 0; b < len(data); b += 110 {
			put16(data[b+108:], randHalf(r, 5, 10))
		}
	case ggml.Q5_K:
		for b := 0; b < len(data); b += 176 {
			put16(data[b:], randHalf(r, 5, 10))
			put16(data[b+2:], randHalf(r, 5, 10))
		}
	case ggml.IQ4_XS:
		for b := 0; b < len(data); b += 136 {
			put16(data[b:], randHalf(r, 5, 10))
		}
	}
	return Matrix{Type: t, Rows: rows, Cols: cols, Data: data}
}

// refHalf converts binary16 to float64 from the definition of the format.
func refHalf(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 31
	m := float64(h & 1023)
	switch e {
	case 0:
		return sign * m * math.Pow(2, -24)
	case 31:
		if m == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * (1 + m/1024) * math.Pow(2, float64(e-15))
}

// refRow dequantises row r of m to float64, element by element from the block definitions.
func refRow(m Matrix, r int) []float64 {
	rb := m.RowBytes()
	row := m.Data[r*rb : (r+1)*rb]
	out := make([]float64, m.Cols)
	u16 := func(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
	for e := range out {
		switch m.Type {
		case ggml.F32:
			out[e] = float64(math.Float32frombits(binary.LittleEndian.Uint32(row[4*e:])))
		case ggml.F16:
			out[e] = refHalf(u16(row[2*e:]))
		case ggml.BF16:
			out[e] = float64(math.Float32frombits(uint32(u16(row[2*e:])) << 16))
		case ggml.Q8_0:
			blk := row[34*(e/32):]
			out[e] = refHalf(u16(blk)) * float64(int8(blk[2+e%32]))
		case ggml.Q4_0:
			blk := row[18*(e/32):]
			j := e % 32
			q := int(blk[2+j%16] & 15)
			if j >= 16 {
				q = int(blk[2+j%16] >> 4)
			}
			out[e] = refHalf(u16(blk)) * float64(q-8)
		case ggml.Q4_K:
			blk := row[144*(e/256):]
			d, dmin := refHalf(u16(blk)), refHalf(u16(blk[2:]))
			sc := blk[4:16]
			s := (e % 256) / 32 // sub-block
			var scale, min int
			if s < 4 {
				scale, min = int(sc[s]&63), int(sc[s+4]&63)
			} else {
				scale = int(sc[s+4]&15) | int(sc[s-4]>>6)<<4
				min = int(sc[s+4]>>4) | int(sc[s]>>6)<<4
			}
			b := blk[16+32*(s/2)+e%32]
			q := int(b & 15)
			if s%2 == 1 {
				q = int(b >> 4)
			}
			out[e] = d*float64(scale*q) - dmin*float64(min)
		case ggml.Q6_K:
			blk := row[210*(e/256):]
			i := e % 256
			h, g, l := i/128, (i%128)/32, i%32
			b := blk[64*h+32*(g%2)+l]
			lo := int(b & 15)
			if g >= 2 {
				lo = int(b >> 4)
			}
			hi := int(blk[128+32*h+l]>>(2*g)) & 3
			q := lo | hi<<4
			out[e] = refHalf(u16(blk[208:])) * float64(int8(blk[192+i/16])) * float64(q-32)
		default:
			out[e] = refMore(m.Type, row, e)
		}
	}
	return out
}

// iq4 are the levels of IQ4_NL and IQ4_XS, from the format's definition.
var iq4 = [16]float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// refMore is refRow's element e for the types without assembly, from their block definitions.
func refMore(t ggml.Type, row []byte, e int) float64 {
	u16 := func(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
	nib := func(qs []byte, j int) int { // element j of 32 in a block of 16 nibble bytes
		if j < 16 {
			return int(qs[j] & 15)
		}
		return int(qs[j-16] >> 4)
	}
	j := e % 32
	switch t {
	case ggml.Q4_1:
		blk := row[20*(e/32):]
		return refHalf(u16(blk))*float64(nib(blk[4:], j)) + refHalf(u16(blk[2:]))
	case ggml.Q5_0:
		blk := row[22*(e/32):]
		hi := int(binary.LittleEndian.Uint32(blk[2:])>>j) & 1
		return refHalf(u16(blk)) * float64(nib(blk[6:], j)+16*hi-16)
	case ggml.Q5_1:
		blk := row[24*(e/32):]
		hi := int(binary.LittleEndian.Uint32(blk[4:])>>j) & 1
		return refHalf(u16(blk))*float64(nib(blk[8:], j)+16*hi) + refHalf(u16(blk[2:]))
	case ggml.IQ4_NL:
		blk := row[18*(e/32):]
		return refHalf(u16(blk)) * iq4[nib(blk[2:], j)]
	}
	i := e % 256
	switch t {
	case ggml.Q5_K: // as Q4_K, with a fifth bit per element in qh
		blk := row[176*(e/256):]
		d, dmin := refHalf(u16(blk)), refHalf(u16(blk[2:]))
		sc := blk[4:16]
		s := i / 32
		var scale, min int
		if s < 4 {
			scale, min = int(sc[s]&63), int(sc[s+4]&63)
		} else {
			scale = int(sc[s+4]&15) | int(sc[s-4]>>6)<<4
			min = int(sc[s+4]>>4) | int(sc[s]>>6)<<4
		}
		b := blk[48+32*(s/2)+i%32]
		q := int(b & 15)
		if s%2 == 1 {
			q = int(b >> 4)
		}
		q += 16 * (int(blk[16+i%32]>>s) & 1)
		return d*float64(scale*q) - dmin*float64(min)
	case ggml.IQ4_XS:
		blk := row[136*(e/256):]
		ib := i / 32
		ls := int(blk[4+ib/2]>>(4*(ib%2)))&15 | (int(u16(blk[2:])>>(2*ib))&3)<<4
		return refHalf(u16(blk)) * float64(ls-32) * iq4[nib(blk[8+16*ib:], i%32)]
	case ggml.Q2_K:
		blk := row[84*(e/256):]
		h, g, l := i/128, (i%128)/32, i%32 // half, 2-bit plane, position
		sc := blk[i/16]
		q := int(blk[16+32*h+l]>>(2*g)) & 3
		return refHalf(u16(blk[80:]))*float64(int(sc&15)*q) - refHalf(u16(blk[82:]))*float64(sc>>4)
	case ggml.Q3_K:
		blk := row[110*(e/256):]
		h, g, l := i/128, (i%128)/32, i%32
		q := int(blk[32+32*h+l]>>(2*g)) & 3
		if blk[l]>>(4*h+g)&1 == 0 {
			q -= 4
		}
		// 16 scales of 6 bits: low 4 bits in bytes 0–7 (two per byte), high 2 bits in 8–11.
		sb := blk[96:108]
		k := i / 16
		low := int(sb[k%8]>>(4*(k/8))) & 15
		high := int(sb[8+k%4]>>(2*(k/4))) & 3
		return refHalf(u16(blk[108:])) * float64(low|high<<4-32) * float64(q)
	}
	panic("refMore: " + t.String())
}

// quantBlock is the activation block size of a type's 8-bit quantisation (0: none).
func quantBlock(t ggml.Type) int {
	switch t {
	case ggml.Q8_0, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.IQ4_NL:
		return 32
	case ggml.Q4_K, ggml.Q6_K, ggml.Q2_K, ggml.Q3_K, ggml.Q5_K, ggml.IQ4_XS:
		return 256
	}
	return 0
}

// reference returns the exact dot products and an error bound for each: the bound is
// Σ|w|·amax/254 for the 8-bit activations (rounding to the nearest of steps amax/127), for
// blocks of 32 plus Σ|w|·(amax·2^-11 + 127·2^-25) for their half-precision scale (relative
// error 2^-11, absolute 2^-25 below the normal halves, times |q| ≤ 127), plus a float32
// accumulation allowance of 2e-6·Σ|w·x|·√cols.
func reference(m Matrix, x []float32, n int) (want, bound []float64) {
	want = make([]float64, n*m.Rows)
	bound = make([]float64, n*m.Rows)
	qb := quantBlock(m.Type)
	for r := 0; r < m.Rows; r++ {
		w := refRow(m, r)
		for i := 0; i < n; i++ {
			xs := x[i*m.Cols : (i+1)*m.Cols]
			var s, abs, q float64
			for c, wc := range w {
				s += wc * float64(xs[c])
				abs += math.Abs(wc * float64(xs[c]))
			}
			if qb > 0 {
				for b := 0; b < m.Cols; b += qb {
					amax := float64(absMax(xs[b : b+qb]))
					e := amax / 254 * (1 + 1e-5)
					if qb == 32 {
						e += amax*0x1p-11 + 127*0x1p-25
					}
					for c := b; c < b+qb; c++ {
						q += math.Abs(w[c]) * e
					}
					if m.Type == ggml.Q4_1 || m.Type == ggml.Q5_1 {
						// The block's m times the half-precision activation sum: its rounding,
						// and the quantisation of the 32 activations it sums.
						bs := map[ggml.Type]int{ggml.Q4_1: 20, ggml.Q5_1: 24}[m.Type]
						rb := m.RowBytes()
						mv := math.Abs(refHalf(binary.LittleEndian.Uint16(m.Data[r*rb+bs*(b/32)+2:])))
						var sx float64
						for c := b; c < b+qb; c++ {
							sx += math.Abs(float64(xs[c]))
						}
						q += mv * (sx*0x1p-10 + 32*amax/254 + 127*0x1p-24)
					}
				}
			}
			want[i*m.Rows+r] = s
			bound[i*m.Rows+r] = q + 2e-6*abs*math.Sqrt(float64(m.Cols)) + 1e-30
		}
	}
	return want, bound
}

func randomActivations(r *rand.Rand, n, cols int) []float32 {
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	// One all-zero row and one with a dominant element, when there are enough rows.
	if n > 2 {
		clear(x[cols : 2*cols])
		x[2*cols] = 100
	}
	return x
}

// dirtyScratch leaves a scratch buffer full of garbage in the pool, so that a kernel that
// reads bytes the quantiser did not write fails.
func dirtyScratch() {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = 0xa5
	}
	actPool.Put(&actBuf{b: b})
}

// TestQuantizeMatchesGeneric checks that the assembly quantisers write exactly the bytes of the
// Go ones.
func TestQuantizeMatchesGeneric(t *testing.T) {
	if asmImpl == nil {
		t.Skip("no assembly kernels on this CPU or build")
	}
	r := rand.New(rand.NewPCG(9, 9))
	for _, cols := range []int{32, 96, 256, 768, 2048} {
		x := randomActivations(r, 1, cols)
		x[3] = 0.5 * x[0] // ties are rounded to even by both
		zero := make([]float32, cols)
		for _, in := range [][]float32{x, zero} {
			a, g := make([]byte, act32Bytes(cols)), make([]byte, act32Bytes(cols))
			asmImpl.quant32(a, in)
			genericImpl.quant32(g, in)
			if string(a) != string(g) {
				t.Errorf("quant32 of %d: assembly and Go differ", cols)
			}
			qa, qg := make([]byte, cols), make([]byte, cols)
			da, dg := make([]uint16, cols/32), make([]uint16, cols/32)
			asmImpl.quantQ8(qa, da, in)
			genericImpl.quantQ8(qg, dg, in)
			if string(qa) != string(qg) || !slices.Equal(da, dg) {
				t.Errorf("QuantizeQ8_0 of %d: assembly and Go differ", cols)
			}
			for i, v := range in { // each value within half a step (and the scale's rounding)
				d := ggml.HalfToFloat32(dg[i/32])
				if e := math.Abs(float64(v) - float64(int8(qg[i]))*float64(d)); e > 0.5*float64(d)+1e-3*math.Abs(float64(v)) {
					t.Fatalf("QuantizeQ8_0 of %d: value %d = %g comes back as %d × %g", cols, i, v, int8(qg[i]), d)
				}
			}
			if cols%256 == 0 {
				a, g := make([]byte, cols/256*actKBytes), make([]byte, cols/256*actKBytes)
				asmImpl.quantK(a, in)
				genericImpl.quantK(g, in)
				if string(a) != string(g) {
					t.Errorf("quantK of %d: assembly and Go differ", cols)
				}
			}
		}
	}
}

// withImpl runs f with the named implementation forced.
func withImpl(t testing.TB, name string, f func()) {
	for _, im := range impls {
		if im.name == name {
			prev := forceImpl.Swap(im)
			defer forceImpl.Store(prev)
			f()
			return
		}
	}
	t.Fatalf("no implementation %q", name)
}

// implNames lists the implementations this CPU runs: "generic" and the assembly ones.
func implNames() []string {
	var names []string
	for _, im := range impls {
		names = append(names, im.name)
	}
	return names
}

func TestMatMulAgainstReference(t *testing.T) {
	shapes := []struct {
		rows, cols int
		batches    []int
	}{
		{1, 256, []int{1, 2, 3, 4, 5}},
		{3, 512, []int{1, 4, 9}},
		{37, 768, []int{1, 3, 8}},
		{300, 256, []int{1, 6}}, // parallel
		{70, 2048, []int{2}},
	}
	floatCols := []int{1, 7, 13, 100}
	// Q8_0 and Q4_0 run in groups of four blocks; these leave 1, 3 and 1 blocks over.
	block32Cols := []int{32, 96, 416}
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range testTypes {
		cases := shapes
		extra := floatCols
		switch quantBlock(typ) {
		case 32:
			extra = block32Cols
		case 256:
			extra = nil
		}
		{
			for _, c := range extra {
				cases = append(cases, struct {
					rows, cols int
					batches    []int
				}{5, c, []int{1, 2, 5}})
			}
		}
		for _, sh := range cases {
			m := randomMatrix(r, typ, sh.rows, sh.cols)
			for _, n := range sh.batches {
				x := randomActivations(r, n, sh.cols)
				want, bound := reference(m, x, n)
				for _, generic := range implNames() {
					name := fmt.Sprintf("%v/%dx%d/n=%d/impl=%v", typ, sh.rows, sh.cols, n, generic)
					t.Run(name, func(t *testing.T) {
						got := make([]float32, n*sh.rows)
						for k := range got {
							got[k] = float32(math.NaN()) // out need not be zeroed
						}
						dirtyScratch()
						withImpl(t, generic, func() { MatMul(got, m, x, n) })
						for k := range got {
							if d := math.Abs(float64(got[k]) - want[k]); !(d <= bound[k]) {
								t.Fatalf("out[%d] = %g, want %g ± %g (off by %g)", k, got[k], want[k], bound[k], d)
							}
						}
					})
				}
			}
		}
	}
}

// TestAssemblyMatchesGeneric checks that both implementations compute the same thing: they
// share the activation quantisation, so they differ only in the order of float additions.
func TestAssemblyMatchesGeneric(t *testing.T) {
	if asmImpl == nil {
		t.Skip("no assembly kernels on this CPU or build")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range testTypes {
		for _, n := range []int{1, 2, 3, 4, 7} {
			m := randomMatrix(r, typ, 41, 1024)
			x := randomActivations(r, n, m.Cols)
			a := make([]float32, n*m.Rows)
			g := make([]float32, n*m.Rows)
			withImpl(t, "generic", func() { MatMul(g, m, x, n) })
			_, bound := reference(m, x, n)
			for _, name := range implNames()[1:] {
				withImpl(t, name, func() { MatMul(a, m, x, n) })
				for k := range a {
					// The float part of the reference bound is the allowance for summation order.
					if d := math.Abs(float64(a[k] - g[k])); d > 1e-5*math.Abs(float64(g[k]))+bound[k]*1e-3 {
						t.Fatalf("%v n=%d: out[%d]: %s %g, generic %g", typ, n, k, name, a[k], g[k])
					}
				}
			}
		}
	}
}

// TestBatchInvariance checks that every activation row of a batch gets, bit for bit, what it
// gets alone, so that batched and one-token forwards of a model agree exactly: on long rows
// and on short ones (at most 256 values, where batches of more than four rows take four
// weight rows at a time), in batches with a partial group of four.
func TestBatchInvariance(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range testTypes {
		for _, cols := range []int{768, 256} {
			if quantBlock(typ) == 0 { // float rows with a tail past the last block
				cols += map[int]int{768: 3, 256: -3}[cols]
			}
			m := randomMatrix(r, typ, 50, cols)
			for _, n := range []int{7, 9} {
				x := randomActivations(r, n, cols)
				for _, generic := range implNames() {
					withImpl(t, generic, func() {
						batch := make([]float32, n*m.Rows)
						MatMul(batch, m, x, n)
						one := make([]float32, m.Rows)
						for i := 0; i < n; i++ {
							MatVec(one, m, x[i*cols:(i+1)*cols])
							for k, v := range one {
								if b := batch[i*m.Rows+k]; math.Float32bits(b) != math.Float32bits(v) {
									t.Fatalf("%v impl=%v cols=%d n=%d: row %d of activation %d: batch %g, alone %g", typ, generic, cols, n, k, i, b, v)
								}
							}
						}
					})
				}
			}
		}
	}
}

func TestExtremeBlocks(t *testing.T) {
	// Quants at their extremes with all-positive and all-negative activations: int8 -128 in
	// Q8_0, nibbles 0 and 15 (and fifth bits all set or clear), Q4_K and Q5_K scales and mins
	// 63, Q6_K scale -128 and quants 0 and 63, IQ4 values -127 and 113 with IQ4_XS scales -32
	// and 31, Q2_K scales and mins 15 and quants 3, Q3_K scales -32 and 31 with quants -4 and
	// 3. Every byte after the block's float scales is the fill (Q6_K's come last).
	cases := []struct {
		typ  ggml.Type
		fill byte
	}{
		{ggml.Q8_0, 0x80}, {ggml.Q8_0, 0x7f}, {ggml.Q4_0, 0x00}, {ggml.Q4_0, 0xff},
		{ggml.Q4_K, 0xff}, {ggml.Q4_K, 0x00}, {ggml.Q6_K, 0x80}, {ggml.Q6_K, 0xff}, {ggml.Q6_K, 0x00},
		{ggml.Q4_1, 0xff}, {ggml.Q4_1, 0x00}, {ggml.Q5_0, 0xff}, {ggml.Q5_0, 0x00},
		{ggml.Q5_1, 0xff}, {ggml.Q5_1, 0x00}, {ggml.IQ4_NL, 0x00}, {ggml.IQ4_NL, 0xff},
		{ggml.Q5_K, 0xff}, {ggml.Q5_K, 0x00}, {ggml.IQ4_XS, 0xff}, {ggml.IQ4_XS, 0x00},
		{ggml.Q2_K, 0xff}, {ggml.Q2_K, 0x00}, {ggml.Q3_K, 0xff}, {ggml.Q3_K, 0x00},
	}
	// The bytes of each block that hold quants and integer scales: [from, to).
	quants := map[ggml.Type][2]int{
		ggml.Q8_0: {2, 34}, ggml.Q4_0: {2, 18}, ggml.Q4_K: {4, 144}, ggml.Q6_K: {0, 208},
		ggml.Q4_1: {4, 20}, ggml.Q5_0: {2, 22}, ggml.Q5_1: {4, 24}, ggml.IQ4_NL: {2, 18},
		ggml.Q5_K: {4, 176}, ggml.IQ4_XS: {2, 136}, ggml.Q2_K: {0, 80}, ggml.Q3_K: {0, 108},
	}
	for _, c := range cases {
		for _, sign := range []float32{1, -1} {
			m := randomMatrix(rand.New(rand.NewPCG(5, 6)), c.typ, 4, 512)
			bs, _ := c.typ.Info()
			span := quants[c.typ]
			for b := 0; b < len(m.Data); b += bs.TypeSize {
				blk := m.Data[b : b+bs.TypeSize]
				for i := span[0]; i < span[1]; i++ {
					blk[i] = c.fill
				}
			}
			x := make([]float32, 2*m.Cols)
			for i := range x {
				x[i] = sign * float32(1+i%5)
			}
			want, bound := reference(m, x, 2)
			for _, generic := range implNames() {
				got := make([]float32, 2*m.Rows)
				withImpl(t, generic, func() { MatMul(got, m, x, 2) })
				for k := range got {
					if d := math.Abs(float64(got[k]) - want[k]); !(d <= bound[k]) {
						t.Errorf("%v fill %#x sign %v impl=%v: out[%d] = %g, want %g ± %g", c.typ, c.fill, sign, generic, k, got[k], want[k], bound[k])
					}
				}
			}
		}
	}
}

func TestDotAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 64, 100, 1000} {
		a := randomActivations(r, 1, n)
		b := randomActivations(r, 1, n)
		var want, abs float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
			abs += math.Abs(float64(a[i]) * float64(b[i]))
		}
		for _, generic := range implNames() {
			withImpl(t, generic, func() {
				if got := Dot(a, b); math.Abs(float64(got)-want) > 1e-5*abs+1e-6 {
					t.Errorf("n=%d impl=%v: Dot = %g, want %g", n, generic, got, want)
				}
				y := append([]float32(nil), b...)
				Axpy(0.5, a, y)
				for i := range y {
					if w := b[i] + 0.5*a[i]; math.Abs(float64(y[i]-w)) > 1e-6*math.Abs(float64(w))+1e-7 {
						t.Fatalf("n=%d impl=%v: Axpy y[%d] = %g, want %g", n, generic, i, y[i], w)
					}
				}
			})
		}
	}
}

func TestSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	m := randomMatrix(r, ggml.Q4_K, 10, 512)
	x := randomActivations(r, 1, 512)
	all := make([]float32, 10)
	MatVec(all, m, x)
	part := make([]float32, 4)
	MatVec(part, m.Slice(3, 7), x)
	for i, v := range part {
		if v != all[3+i] {
			t.Fatalf("Slice(3, 7) row %d: %g, want %g", i, v, all[3+i])
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		m    Matrix
		ok   bool
	}{
		{"ok", Matrix{Type: ggml.Q8_0, Rows: 2, Cols: 64, Data: make([]byte, 2*2*34)}, true},
		{"short data", Matrix{Type: ggml.Q8_0, Rows: 2, Cols: 64, Data: make([]byte, 2*2*34-1)}, false},
		{"partial block", Matrix{Type: ggml.Q4_K, Rows: 1, Cols: 128, Data: make([]byte, 72)}, false},
		{"unsupported type", Matrix{Type: ggml.IQ2_XXS, Rows: 1, Cols: 256, Data: make([]byte, 66)}, false},
		{"zero columns", Matrix{Type: ggml.F32, Rows: 1, Cols: 0, Data: nil}, false},
	}
	for _, c := range cases {
		if err := c.m.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v", c.name, err)
		}
	}
}

func TestMatMulPanicsOnBadLengths(t *testing.T) {
	m := Matrix{Type: ggml.F32, Rows: 2, Cols: 8, Data: make([]byte, 64)}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	MatVec(make([]float32, 3), m, make([]float32, 8))
}

func TestHalfToFloat(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got, want := ggml.HalfToFloat32(uint16(h)), refHalf(uint16(h))
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("%#04x: %g, want NaN", h, got)
			}
			continue
		}
		if float64(got) != want {
			t.Fatalf("%#04x: %g, want %g", h, got, want)
		}
	}
}

// TestConcurrentCallers runs products from several goroutines at once over the shared pool.
func TestConcurrentCallers(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	type work struct {
		m    Matrix
		x    []float32
		n    int
		want []float32
	}
	var ws []work
	for k, typ := range testTypes {
		m := randomMatrix(r, typ, 200+40*k, 512)
		n := 1 + k%5
		x := randomActivations(r, n, 512)
		want := make([]float32, n*m.Rows)
		MatMul(want, m, x, n)
		ws = append(ws, work{m, x, n, want})
	}
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func() {
			got := make([]float32, len(w.want))
			for rep := 0; rep < 20; rep++ {
				MatMul(got, w.m, w.x, w.n)
				for k := range got {
					if got[k] != w.want[k] {
						errs <- fmt.Errorf("%v: out[%d] = %g, want %g", w.m.Type, k, got[k], w.want[k])
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range ws {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestMatMuls checks that several products of one input in one call equal the products made
// one by one, bit for bit, for matrices of mixed types (as a Q4_K_M file mixes Q4_K and Q6_K).
func TestMatMuls(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	const cols, n = 768, 3
	var ms []Matrix
	for k, typ := range []ggml.Type{ggml.Q4_K, ggml.Q6_K, ggml.F16, ggml.Q8_0, ggml.Q4_0, ggml.Q4_K} {
		ms = append(ms, randomMatrix(r, typ, 64+100*k, cols))
	}
	x := randomActivations(r, n, cols)
	for _, generic := range implNames() {
		withImpl(t, generic, func() {
			outs := make([][]float32, len(ms))
			for k, m := range ms {
				outs[k] = make([]float32, n*m.Rows)
			}
			MatMuls(outs, ms, x, n)
			for k, m := range ms {
				want := make([]float32, n*m.Rows)
				MatMul(want, m, x, n)
				for j := range want {
					if outs[k][j] != want[j] {
						t.Fatalf("impl=%v matrix %d (%v): out[%d] = %g, want %g", generic, k, m.Type, j, outs[k][j], want[j])
					}
				}
			}
		})
	}
}

// allocsPerCall returns the mean number of heap allocations of f over runs calls, on one P
// (as testing.AllocsPerRun, but unrounded).
func allocsPerCall(runs int, f func()) float64 {
	prev := runtime.GOMAXPROCS(1)
	refreshWorkers()
	defer func() {
		runtime.GOMAXPROCS(prev)
		refreshWorkers()
	}()
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}

// TestSmallMatMulAllocs checks that a product too small to share out to the workers (attention
// runs thousands per token) allocates nothing, for every type. (The pure-Go float kernels
// decode each weight row into a buffer of their own.)
func TestSmallMatMulAllocs(t *testing.T) {
	if Implementation() == "generic" {
		t.Skip("the pure-Go kernels allocate their float row buffer")
	}
	r := rand.New(rand.NewPCG(9, 9))
	for _, typ := range testTypes {
		m := randomMatrix(r, typ, 16, 256)
		for _, n := range []int{1, 3, 5} {
			x := randomActivations(r, n, 256)
			out := make([]float32, n*16)
			MatMul(out, m, x, n) // fill the scratch pool
			if !raceEnabled {
				if a := testing.AllocsPerRun(20, func() { MatMul(out, m, x, n) }); a != 0 {
					t.Errorf("%v 16×256, %d rows: %v allocations per MatMul", typ, n, a)
				}
				continue
			}
			// Under the race detector sync.Pool drops a quarter of the buffers put back at
			// random, and each dropped one costs two allocations (the buffer and its bytes) on
			// the next call: 0.5 per call expected. A product that allocated on every call
			// would show at least 1.
			const runs = 400
			if a := allocsPerCall(runs, func() { MatMul(out, m, x, n) }); a >= 1 {
				t.Errorf("%v 16×256, %d rows: %.2f allocations per MatMul over %d calls (race build)", typ, n, a, runs)
			}
		}
	}
}

// TestRows16MatchesRowKernel checks that every 16-row kernel gives, bit for bit, what its
// type's one-row kernel gives: short and long rows, a last 8-block, several groups of 16,
// extreme values, and results that are signed zeros.
func TestRows16MatchesRowKernel(t *testing.T) {
	checkRowGroupKernels(t, rand.New(rand.NewPCG(21, 22)), "16-row", func(im *impl, k kind) dotFunc { return im.rows16[k] }, 1, []int{16, 48})
}

// TestRows4MatchesRowKernel checks that every kernel of four weight rows at a time gives, bit
// for bit, what its type's four-activation-row kernel gives, in the same cases.
func TestRows4MatchesRowKernel(t *testing.T) {
	checkRowGroupKernels(t, rand.New(rand.NewPCG(23, 24)), "four-weight-row", func(im *impl, k kind) dotFunc { return im.rows4[k] }, 4, []int{4, 12, 48})
}

// checkRowGroupKernels compares the kernels groupKernel returns, which take weight rows in
// groups (counts from rowCounts), with each type's kernel of nx activation rows, bit for bit.
func checkRowGroupKernels(t *testing.T, r *rand.Rand, what string, groupKernel func(*impl, kind) dotFunc, nx int, rowCounts []int) {
	t.Helper()
	tested := 0
	for _, im := range impls {
		for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.BF16} {
			tk := kernelOf(typ)
			group := groupKernel(im, tk.kind)
			if group == nil {
				continue
			}
			tested++
			for _, cols := range []int{8, 16, 24, 40, 64, 72, 128, 256, 768, 776} {
				for _, rows := range rowCounts {
					for _, special := range []string{"random", "zeros", "huge"} {
						m := randomMatrix(r, typ, rows, cols)
						x := randomActivations(r, nx, cols)
						switch special {
						case "zeros": // every product ±0: the sums' signs of zero must agree
							for i := range x {
								x[i] = float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
							}
						case "huge": // partial sums that overflow in some orders
							for i := range x {
								x[i] = float32(r.NormFloat64()) * 1e36
							}
						}
						want := make([]float32, nx*rows)
						got := make([]float32, nx*rows)
						nb := cols / tk.blockElems
						xp := (*byte)(unsafe.Pointer(&x[0]))
						im.dot[tk.kind][nx-1](&m.Data[0], m.RowBytes(), rows, nb, xp, 4*cols, &want[0], rows)
						group(&m.Data[0], m.RowBytes(), rows, nb, xp, 4*cols, &got[0], rows)
						for k := range want {
							if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
								t.Fatalf("%s %v %d×%d %s: activation row %d, weight row %d: %s kernel %g (%#x), row kernel %g (%#x)",
									im.name, typ, rows, cols, special, k/rows, k%rows, what, got[k], math.Float32bits(got[k]), want[k], math.Float32bits(want[k]))
							}
						}
					}
				}
			}
		}
	}
	if asmImpl != nil && asmImpl.name == "avx512" && tested == 0 {
		t.Fatalf("the AVX-512 kernels have no %s kernels", what)
	}
}

// TestSpinMore checks when a worker stops watching for jobs: spinFor after its last job, or
// holdSpinFor while the pool is held.
func TestSpinMore(t *testing.T) {
	for _, tc := range []struct {
		elapsed time.Duration
		held    bool
		want    bool
	}{
		{0, false, true},
		{spinFor, false, true},
		{spinFor + time.Microsecond, false, false},
		{spinFor + time.Microsecond, true, true},
		{holdSpinFor, true, true},
		{holdSpinFor + time.Microsecond, true, false},
		{time.Second, false, false},
	} {
		if got := spinMore(tc.elapsed, tc.held); got != tc.want {
			t.Errorf("spinMore(%v, held %v) = %v, want %v", tc.elapsed, tc.held, got, tc.want)
		}
	}
}

// TestHoldWorkers checks that holds nest, that jobs run as always while the pool is held, that
// the workers park once the last hold is released, that a hold wakes no worker that is not
// parked, and that a release without a hold panics and leaves the pool unheld.
func TestHoldWorkers(t *testing.T) {
	HoldWorkers()
	HoldWorkers()
	for range 3 {
		var runs [64]atomic.Int32
		Parallel(len(runs), 4, func(task, _ int) { runs[task].Add(1) })
		for i := range runs {
			if n := runs[i].Load(); n != 1 {
				t.Fatalf("held pool: task %d ran %d times", i, n)
			}
		}
		time.Sleep(time.Millisecond) // serial work between jobs, longer than spinFor
	}
	ReleaseWorkers()
	ReleaseWorkers()
	deadline := time.Now().Add(5 * time.Second)
	for pool.spinning.Load() != 0 || pool.parked.Load() != pool.started.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the last release: %d workers spinning, %d of %d parked", pool.spinning.Load(), pool.parked.Load(), pool.started.Load())
		}
		time.Sleep(time.Millisecond)
	}
	// Holds and releases while every worker is parked queue at most one wake a worker.
	for range 100 {
		HoldWorkers()
		ReleaseWorkers()
	}
	if n, w := len(pool.wake), pool.started.Load(); int64(n) > w {
		t.Errorf("100 holds of a parked pool queued %d wakes for %d workers", n, w)
	}
	defer func() {
		if recover() == nil {
			t.Error("ReleaseWorkers without HoldWorkers did not panic")
		}
		if h := pool.holds.Load(); h != 0 {
			t.Errorf("after a ReleaseWorkers without HoldWorkers, %d holds", h)
		}
	}()
	ReleaseWorkers()
}

// TestParallel checks that Parallel runs every task exactly once, with worker numbers in
// range and no two concurrent tasks sharing one, from several callers at once, and from
// within a task.
func TestParallel(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 64} {
		var wg sync.WaitGroup
		for caller := 0; caller < 4; caller++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				const n = 500
				var runs [n]atomic.Int32
				busy := make([]atomic.Int32, workers)
				Parallel(n, workers, func(task, w int) {
					if w < 0 || w >= workers {
						t.Errorf("worker %d of %d", w, workers)
						return
					}
					if busy[w].Add(1) != 1 {
						t.Errorf("worker %d runs two tasks at once", w)
					}
					if task%100 == 0 { // a nested product, as an attention task's may be
						m := randomMatrix(rand.New(rand.NewPCG(uint64(task), 1)), ggml.F32, 256, 256)
						MatMul(make([]float32, 256), m, make([]float32, 256), 1)
					}
					runs[task].Add(1)
					busy[w].Add(-1)
				})
				for i := range runs {
					if c := runs[i].Load(); c != 1 {
						t.Errorf("workers %d: task %d ran %d times", workers, i, c)
					}
				}
			}()
		}
		wg.Wait()
	}
	Parallel(0, 2, func(int, int) { t.Error("a task of none ran") })
	ran := 0
	Parallel(3, 0, func(task, w int) {
		if w != 0 {
			t.Errorf("workers 0: task %d ran as worker %d", task, w)
		}
		ran++
	})
	if ran != 3 {
		t.Errorf("workers 0: %d of 3 tasks ran", ran)
	}
}

// TestPairsMatchRowKernel checks that every two-weight-row kernel, with prefetch and without,
// gives, bit for bit, what its type's four-activation-row kernel gives: short and long rows,
// a last 8-block, extreme values.
func TestPairsMatchRowKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, im := range impls {
		for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.BF16} {
			tk := kernelOf(typ)
			if (im.pairs4[tk.kind] == nil) != (im.pairs4Cached[tk.kind] == nil) {
				t.Errorf("%s %v: a two-weight-row kernel with prefetch but none without, or the reverse", im.name, typ)
			}
			for _, pairs := range []dotFunc{im.pairs4[tk.kind], im.pairs4Cached[tk.kind]} {
				if pairs == nil {
					continue
				}
				for _, cols := range []int{8, 16, 24, 64, 72, 256, 776} {
					for _, huge := range []bool{false, true} {
						const rows, n = 6, 4
						m := randomMatrix(r, typ, rows, cols)
						x := randomActivations(r, n, cols)
						if huge {
							for i := range x {
								x[i] *= 1e36
							}
						}
						want := make([]float32, n*rows)
						got := make([]float32, n*rows)
						nb := cols / tk.blockElems
						xb := (*byte)(unsafe.Pointer(&x[0]))
						im.dot[tk.kind][3](&m.Data[0], m.RowBytes(), rows, nb, xb, 4*cols, &want[0], rows)
						pairs(&m.Data[0], m.RowBytes(), rows, nb, xb, 4*cols, &got[0], rows)
						for k := range want {
							if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
								t.Fatalf("%s %v %d×%d huge=%v: out[%d]: pairs kernel %g, four-row kernel %g", im.name, typ, rows, cols, huge, k, got[k], want[k])
							}
						}
					}
				}
			}
		}
	}
}

// TestParallelForGuided checks parallelFor's guided claims: every item runs exactly once, every
// claim starts at a multiple of grain and holds at least grain items unless it is the last,
// and a claim never takes more than half a participant's share of the items left then (so
// the first claim takes the most), for several sizes, grains and worker counts.
func TestParallelForGuided(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 3} {
		runtime.GOMAXPROCS(procs)
		refreshWorkers()
		for _, tc := range []struct{ n, grain int }{{1, 16}, {16, 16}, {17, 16}, {768, 16}, {2048, 16}, {32000, 48}, {1000, 1}, {5, 2}} {
			var mu sync.Mutex
			var claims [][2]int
			runs := make([]atomic.Int32, tc.n)
			parallelFor(tc.n, tc.grain, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					runs[i].Add(1)
				}
				mu.Lock()
				claims = append(claims, [2]int{lo, hi})
				mu.Unlock()
			})
			for i := range runs {
				if c := runs[i].Load(); c != 1 {
					t.Fatalf("GOMAXPROCS %d, n %d grain %d: item %d ran %d times", procs, tc.n, tc.grain, i, c)
				}
			}
			slices.SortFunc(claims, func(a, b [2]int) int { return a[0] - b[0] })
			for k, c := range claims {
				lo, hi := c[0], c[1]
				if lo%tc.grain != 0 || (hi != tc.n && hi-lo < tc.grain) {
					t.Errorf("GOMAXPROCS %d, n %d grain %d: claim [%d, %d) is not a whole number of grains", procs, tc.n, tc.grain, lo, hi)
				}
				participants := min(procs, (tc.n+tc.grain-1)/tc.grain)
				if share := (tc.n - lo) / (2 * participants); participants > 1 && hi-lo > max(tc.grain, share+tc.grain-1) {
					t.Errorf("GOMAXPROCS %d, n %d grain %d: claim [%d, %d) takes more than half a share of the %d items left", procs, tc.n, tc.grain, lo, hi, tc.n-lo)
				}
				if k > 0 && hi-lo > claims[k-1][1]-claims[k-1][0] {
					t.Errorf("GOMAXPROCS %d, n %d grain %d: claim [%d, %d) is longer than the one before it", procs, tc.n, tc.grain, lo, hi)
				}
			}
		}
	}
	refreshWorkers()
}
