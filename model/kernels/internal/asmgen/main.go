// Command asmgen generates the AVX2/FMA/F16C assembly of package kernels.
//
// Every dot kernel has the same Go signature
//
//	func(w *byte, wstride, rows, n int, x *byte, xstride int, out *float32, ostride int)
//
// and computes, for r in [0, rows) and i in [0, NX):
//
//	out[i*ostride + r] = dot(weight row r, activation row i)
//
// where weight row r starts at w + r*wstride and activation row i at x + i*xstride (bytes), and
// n counts blocks: groups of 8 elements for F32/F16/BF16, blocks of 32 for Q8_0/Q4_0, super-blocks
// of 256 for Q4_K/Q6_K. The activation layouts are those of package kernels (act.go): raw float32
// for the float types, {float32 d; int8 q[32]} for Q8_0/Q4_0 and
// {float32 d; int16 sum16[16]; int16 sum32[8]; int8 q[256]} for the K-quants.
//
// Run it through go generate in package kernels.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

const signature = "func(w *byte, wstride, rows, n int, x *byte, xstride int, out *float32, ostride int)"

// Offsets inside a K-quant activation block.
const (
	actKD     = 0
	actKSum16 = 4
	actKSum32 = 36
	actKQ     = 52
	actKSize  = 308
	act32Size = 36
)

func main() {
	ConstraintExpr("!purego")
	constants()
	for nx := 1; nx <= 4; nx++ {
		floatKernel("F32", nx, 32, loadF32)
		floatKernel("F16", nx, 16, loadF16)
		floatKernel("BF16", nx, 16, loadBF16)
		q80(nx)
		q40(nx)
		q4K(nx)
		q6K(nx)
	}
	axpy()
	Generate()
}

var (
	mask0F, mask30, maskQ4KScale, maskQ6KScale Mem
)

func constants() {
	mask0F = GLOBL("mask0F", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x0f0f0f0f0f0f0f0f))
	}
	mask30 = GLOBL("mask30", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x3030303030303030))
	}
	// Q4_K: mask s (32 bytes) broadcasts int16 word s of a 128-bit lane over the lane.
	maskQ4KScale = GLOBL("maskQ4KScale", RODATA|NOPTR)
	for s := 0; s < 8; s++ {
		for b := 0; b < 32; b += 2 {
			DATA(32*s+b, U8(2*s))
			DATA(32*s+b+1, U8(2*s+1))
		}
	}
	// Q6_K: mask g puts word 2g in the low lane and word 2g+1 in the high lane.
	maskQ6KScale = GLOBL("maskQ6KScale", RODATA|NOPTR)
	// (The assembler wants DATA in increasing offsets.)
	for g := 0; g < 4; g++ {
		for b := 0; b < 32; b += 2 {
			w := 2 * g
			if b >= 16 {
				w++
			}
			DATA(32*g+b, U8(2*w))
			DATA(32*g+b+1, U8(2*w+1))
		}
	}
}

// rowState is what a kernel body sees for one weight row.
type rowState struct {
	p     Register   // current weight block
	x     []Register // current activation block of each activation row
	acc   []VecVirtual
	chain [][]VecVirtual // chain[i][k]: independent accumulators of row i (chain[i][0] == acc[i])
}

// rows emits the row loop shared by all dot kernels. setup emits code once before the row
// loop (constants kept in registers for the whole call); block emits the code of one block
// and the loop advances p by wBlock and each x by xBlock bytes. unroll > 1 adds an unrolled main
// loop of unroll blocks (block is then called with k = 0..unroll-1, at offsets k*wBlock and
// k*xBlock); chains accumulators per activation row are summed at the end of the row.
func rows(name string, nx, wBlock, xBlock, unroll, chains int, setup func(), block func(s *rowState, k int)) {
	TEXT(name, NOSPLIT, signature)
	Doc(fmt.Sprintf("%s computes %d activation row(s) against rows weight rows.", name, nx))
	setup()
	w := Load(Param("w"), GP64())
	nrows := Load(Param("rows"), GP64())
	out := Load(Param("out"), GP64())

	Label("row")
	TESTQ(nrows, nrows)
	JZ(LabelRef("done"))

	s := &rowState{p: GP64()}
	MOVQ(w, s.p)
	x0 := Load(Param("x"), GP64())
	s.x = []Register{x0}
	if nx > 1 {
		xs := Load(Param("xstride"), GP64())
		for i := 1; i < nx; i++ {
			xi := GP64()
			LEAQ(Mem{Base: s.x[i-1], Index: xs, Scale: 1}, xi)
			s.x = append(s.x, xi)
		}
	}
	for i := 0; i < nx; i++ {
		var c []VecVirtual
		for k := 0; k < chains; k++ {
			a := YMM()
			VXORPS(a, a, a)
			c = append(c, a)
		}
		s.chain = append(s.chain, c)
		s.acc = append(s.acc, c[0])
	}
	cnt := Load(Param("n"), GP64())

	if unroll > 1 {
		Label("blocks4")
		CMPQ(cnt, U32(unroll))
		JB(LabelRef("tail"))
		for k := 0; k < unroll; k++ {
			block(s, k)
		}
		ADDQ(U32(unroll*wBlock), s.p)
		for _, xi := range s.x {
			ADDQ(U32(unroll*xBlock), xi)
		}
		SUBQ(U32(unroll), cnt)
		JMP(LabelRef("blocks4"))
	}
	Label("tail")
	TESTQ(cnt, cnt)
	JZ(LabelRef("store"))
	block(s, 0)
	ADDQ(U32(wBlock), s.p)
	for _, xi := range s.x {
		ADDQ(U32(xBlock), xi)
	}
	DECQ(cnt)
	JMP(LabelRef("tail"))

	Label("store")
	for i := 0; i < nx; i++ {
		for k := 1; k < chains; k++ {
			VADDPS(s.chain[i][k], s.acc[i], s.acc[i])
		}
	}
	ost := Load(Param("ostride"), GP64())
	SHLQ(U8(2), ost)
	o := GP64()
	MOVQ(out, o)
	for i := 0; i < nx; i++ {
		hsumStore(s.acc[i], Mem{Base: o})
		if i+1 < nx {
			ADDQ(ost, o)
		}
	}
	ws := Load(Param("wstride"), GP64())
	ADDQ(ws, w)
	ADDQ(U8(4), out)
	DECQ(nrows)
	JMP(LabelRef("row"))

	Label("done")
	VZEROUPPER()
	RET()
}

func hsumStore(acc VecVirtual, dst Mem) {
	hi := XMM()
	VEXTRACTF128(U8(1), acc, hi)
	lo := acc.AsX()
	VADDPS(lo, hi, hi)
	t := XMM()
	VPERMILPS(U8(0x4e), hi, t)
	VADDPS(t, hi, hi)
	VPERMILPS(U8(0xb1), hi, t)
	VADDSS(t, hi, hi)
	VMOVSS(hi, dst)
}

func loadF32(m Mem, y VecVirtual) { VMOVUPS(m, y) }
func loadF16(m Mem, y VecVirtual) { VCVTPH2PS(m, y) }
func loadBF16(m Mem, y VecVirtual) {
	VPMOVZXWD(m, y)
	VPSLLD(U8(16), y, y)
}

// floatKernel: a block is 8 weights (wBytes8 bytes) against 8 float32 activations.
func floatKernel(typ string, nx, wBytes8 int, load func(Mem, VecVirtual)) {
	// Independent accumulators hide the FMA latency: with one activation row the unrolled loop
	// keeps four chains, with several rows the rows themselves are independent chains.
	unroll, chains := 4, 4
	switch {
	case nx == 2:
		chains = 2
	case nx > 2:
		unroll, chains = 2, 1
	}
	name := fmt.Sprintf("dot%sx%d", typ, nx)
	rows(name, nx, wBytes8, 32, unroll, chains, func() {}, func(s *rowState, k int) {
		wv := YMM()
		load(Mem{Base: s.p, Disp: k * wBytes8}, wv)
		for i := 0; i < nx; i++ {
			VFMADD231PS(Mem{Base: s.x[i], Disp: k * 32}, wv, s.chain[i][k%chains])
		}
	})
}

// q80: Q8_0 weight block {f16 d; int8 q[32]} against {f32 d; int8 q[32]}.
func q80(nx int) {
	name := fmt.Sprintf("dotQ8_0x%d", nx)
	var ones VecVirtual
	rowsWithSetup(name, nx, 34, act32Size, func() {
		ones = onesW()
	}, func(s *rowState, k int) {
		dw := blockScale(Mem{Base: s.p})
		aw := YMM()
		VPABSB(Mem{Base: s.p, Disp: 2}, aw)
		for i := 0; i < nx; i++ {
			t := YMM()
			VMOVDQU(Mem{Base: s.x[i], Disp: 4}, t)
			VPSIGNB(Mem{Base: s.p, Disp: 2}, t, t)
			VPMADDUBSW(t, aw, t)
			accumulate(t, ones, dw, Mem{Base: s.x[i]}, s.acc[i])
		}
	})
}

// q40: Q4_0 weight block {f16 d; uint8 qs[16]} against {f32 d; int8 q[32]}.
func q40(nx int) {
	name := fmt.Sprintf("dotQ4_0x%d", nx)
	var ones, eights VecVirtual
	rowsWithSetup(name, nx, 18, act32Size, func() {
		ones = onesW()
		eights = YMM()
		t := GP32()
		MOVL(U32(0x08080808), t)
		VMOVD(t, eights.AsX())
		VPBROADCASTD(eights.AsX(), eights)
	}, func(s *rowState, k int) {
		dw := blockScale(Mem{Base: s.p})
		lo := XMM()
		VMOVDQU(Mem{Base: s.p, Disp: 2}, lo)
		hi := XMM()
		VPSRLW(U8(4), lo, hi)
		q := YMM()
		VINSERTI128(U8(1), hi, lo.AsY(), q)
		VPAND(mask0F, q, q)
		VPSUBB(eights, q, q)
		aw := YMM()
		VPABSB(q, aw)
		for i := 0; i < nx; i++ {
			t := YMM()
			VMOVDQU(Mem{Base: s.x[i], Disp: 4}, t)
			VPSIGNB(q, t, t)
			VPMADDUBSW(t, aw, t)
			accumulate(t, ones, dw, Mem{Base: s.x[i]}, s.acc[i])
		}
	})
}

// rowsWithSetup is rows for the quantised kernels: no unrolling, one chain per row.
func rowsWithSetup(name string, nx, wBlock, xBlock int, setup func(), block func(s *rowState, k int)) {
	rows(name, nx, wBlock, xBlock, 1, 1, setup, block)
}

func onesW() VecVirtual {
	ones := YMM()
	t := GP32()
	MOVL(U32(0x00010001), t)
	VMOVD(t, ones.AsX())
	VPBROADCASTD(ones.AsX(), ones)
	return ones
}

// blockScale loads the f16 at m and returns it broadcast over a YMM as float32.
func blockScale(m Mem) VecVirtual {
	t := GP32()
	MOVWLZX(m, t)
	d := YMM()
	VMOVD(t, d.AsX())
	VCVTPH2PS(d.AsX(), d.AsX())
	VBROADCASTSS(d.AsX(), d)
	return d
}

// accumulate adds (sum of int16 pairs of t, as int32 → float) × dw × (f32 at xd) to acc.
func accumulate(t, ones, dw VecVirtual, xd Mem, acc VecVirtual) {
	VPMADDWD(ones, t, t)
	VCVTDQ2PS(t, t)
	s := YMM()
	VBROADCASTSS(xd, s)
	VMULPS(dw, s, s)
	VFMADD231PS(t, s, acc)
}

// q4K: Q4_K super-block {f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]} against the K
// activation block.
func q4K(nx int) {
	name := fmt.Sprintf("dotQ4_Kx%d", nx)
	rowsWithSetup(name, nx, 144, actKSize, func() {}, func(s *rowState, k int) {
		// Unpack the 6-bit scales and mins (bytes b0..b11 as little-endian words u0, u1, u2):
		// scales 0-3 = u0&0x3f.., 4-7 = (u2&0x0f..) | ((u0>>2)&0x30..);
		// mins 0-3 = u1&0x3f.., 4-7 = ((u2>>4)&0x0f..) | ((u1>>2)&0x30..).
		scales := YMM()
		mins := XMM()
		for j, dst := range []VecVirtual{scales, mins} {
			a, b := GP32(), GP32()
			MOVL(Mem{Base: s.p, Disp: 4 + 4*j}, a)
			MOVL(a, b)
			ANDL(U32(0x3f3f3f3f), b)
			VMOVD(b, dst.AsX())
			c := GP32()
			MOVL(Mem{Base: s.p, Disp: 12}, c)
			if j == 1 {
				SHRL(U8(4), c)
			}
			ANDL(U32(0x0f0f0f0f), c)
			SHRL(U8(2), a)
			ANDL(U32(0x30303030), a)
			ORL(a, c)
			VPINSRD(U8(1), c, dst.AsX(), dst.AsX())
			VPMOVZXBW(dst.AsX(), dst.AsX())
		}
		VINSERTI128(U8(1), scales.AsX(), scales, scales)

		isum := make([]VecVirtual, nx)
		for i := range isum {
			isum[i] = YMM()
			VPXOR(isum[i], isum[i], isum[i])
		}
		for sb := 0; sb < 8; sb++ {
			q := YMM()
			if sb%2 == 0 {
				VMOVDQU(Mem{Base: s.p, Disp: 16 + 32*(sb/2)}, q)
			} else {
				VMOVDQU(Mem{Base: s.p, Disp: 16 + 32*(sb/2)}, q)
				VPSRLW(U8(4), q, q)
			}
			VPAND(mask0F, q, q)
			sc := YMM()
			VPSHUFB(maskQ4KScale.Offset(32*sb), scales, sc)
			for i := 0; i < nx; i++ {
				t := YMM()
				VPMADDUBSW(Mem{Base: s.x[i], Disp: actKQ + 32*sb}, q, t)
				VPMADDWD(sc, t, t)
				VPADDD(t, isum[i], isum[i])
			}
		}
		d := blockScale(Mem{Base: s.p})
		dmin := blockScale(Mem{Base: s.p, Disp: 2})
		for i := 0; i < nx; i++ {
			VCVTDQ2PS(isum[i], isum[i])
			f := YMM()
			VBROADCASTSS(Mem{Base: s.x[i], Disp: actKD}, f)
			VMULPS(d, f, f)
			VFMADD231PS(isum[i], f, s.acc[i])
			m := YMM()
			VPMADDWD(Mem{Base: s.x[i], Disp: actKSum32}, mins, m.AsX())
			VCVTDQ2PS(m.AsX(), m.AsX())
			VBROADCASTSS(Mem{Base: s.x[i], Disp: actKD}, f)
			VMULPS(dmin, f, f)
			VFNMADD231PS(m, f, s.acc[i])
		}
	})
}

// q6K: Q6_K super-block {uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d} against the K
// activation block.
func q6K(nx int) {
	name := fmt.Sprintf("dotQ6_Kx%d", nx)
	rowsWithSetup(name, nx, 210, actKSize, func() {}, func(s *rowState, k int) {
		sc16 := YMM()
		VPMOVSXBW(Mem{Base: s.p, Disp: 192}, sc16)
		// Start every integer sum at -32·Σ scale·sum16: the (q-32) offset.
		isum := make([]VecVirtual, nx)
		for i := range isum {
			t := YMM()
			VPMADDWD(Mem{Base: s.x[i], Disp: actKSum16}, sc16, t)
			VPSLLD(U8(5), t, t)
			isum[i] = YMM()
			VPXOR(isum[i], isum[i], isum[i])
			VPSUBD(t, isum[i], isum[i])
		}
		scLo, scHi := YMM(), YMM()
		VPERMQ(U8(0x44), sc16, scLo)
		VPERMQ(U8(0xee), sc16, scHi)
		for h := 0; h < 2; h++ {
			for g := 0; g < 4; g++ {
				// Group g of half h: 32 six-bit values.
				qlOff := 64*h + 32*(g%2)
				q := YMM()
				VMOVDQU(Mem{Base: s.p, Disp: qlOff}, q)
				if g >= 2 {
					VPSRLW(U8(4), q, q)
				}
				VPAND(mask0F, q, q)
				hb := YMM()
				VMOVDQU(Mem{Base: s.p, Disp: 128 + 32*h}, hb)
				switch g {
				case 0:
					VPSLLW(U8(4), hb, hb)
				case 1:
					VPSLLW(U8(2), hb, hb)
				case 3:
					VPSRLW(U8(2), hb, hb)
				}
				VPAND(mask30, hb, hb)
				VPOR(hb, q, q)
				sc := YMM()
				src := scLo
				if h == 1 {
					src = scHi
				}
				VPSHUFB(maskQ6KScale.Offset(32*g), src, sc)
				for i := 0; i < nx; i++ {
					t := YMM()
					VPMADDUBSW(Mem{Base: s.x[i], Disp: actKQ + 128*h + 32*g}, q, t)
					VPMADDWD(sc, t, t)
					VPADDD(t, isum[i], isum[i])
				}
			}
		}
		d := blockScale(Mem{Base: s.p, Disp: 208})
		for i := 0; i < nx; i++ {
			VCVTDQ2PS(isum[i], isum[i])
			f := YMM()
			VBROADCASTSS(Mem{Base: s.x[i], Disp: actKD}, f)
			VMULPS(d, f, f)
			VFMADD231PS(isum[i], f, s.acc[i])
		}
	})
}

// axpy: y[i] += a*x[i] for n a multiple of 8.
func axpy() {
	TEXT("axpyF32", NOSPLIT, "func(a float32, x, y *float32, n int)")
	Doc("axpyF32 adds a·x to y over n elements, n a multiple of 8.")
	av := YMM()
	VBROADCASTSS(NewParamAddr("a", 0), av)
	x := Load(Param("x"), GP64())
	y := Load(Param("y"), GP64())
	n := Load(Param("n"), GP64())
	Label("loop4")
	CMPQ(n, U8(32))
	JB(LabelRef("loop1"))
	for k := 0; k < 4; k++ {
		t := YMM()
		VMOVUPS(Mem{Base: y, Disp: 32 * k}, t)
		VFMADD231PS(Mem{Base: x, Disp: 32 * k}, av, t)
		VMOVUPS(t, Mem{Base: y, Disp: 32 * k})
	}
	ADDQ(U8(128), x)
	ADDQ(U8(128), y)
	SUBQ(U8(32), n)
	JMP(LabelRef("loop4"))
	Label("loop1")
	TESTQ(n, n)
	JZ(LabelRef("end"))
	t := YMM()
	VMOVUPS(Mem{Base: y}, t)
	VFMADD231PS(Mem{Base: x}, av, t)
	VMOVUPS(t, Mem{Base: y})
	ADDQ(U8(32), x)
	ADDQ(U8(32), y)
	SUBQ(U8(8), n)
	JMP(LabelRef("loop1"))
	Label("end")
	VZEROUPPER()
	RET()
}
