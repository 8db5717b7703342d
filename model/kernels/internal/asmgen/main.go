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
// n counts kernel blocks: 8 elements for F32/F16/BF16, groups of four 32-blocks (128 elements)
// for Q8_0/Q4_0, super-blocks of 256 for Q4_K/Q6_K. The activation layouts are those of
// package kernels (act.go): raw float32 for the float types,
// {float32 d[4]; int32 corr[4]; int32 zero[4]; int8 q[128]} per group for Q8_0/Q4_0 and
// {float32 d; int16 sum16[16]; int16 sum32[8]; int8 q[256]} for the K-quants.
//
// Run it through go generate in package kernels.
package main

import (
	"fmt"
	"math"
	"math/bits"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
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

	// A group of four 32-blocks: float32 d[4]; int32 corr[4], 4 zero words; int8 q[128].
	act32D     = 0
	act32Corr  = 16
	act32Sum   = 32 // the four block sums (float32) of Q4_1 and Q5_1's activations
	act32Q     = 48
	act32Group = 176
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
		q5K(nx)
		iq4XS(nx)
		q4_1(nx)
		q5(nx, false)
		q5(nx, true)
		iq4NL(nx)
		q2K(nx)
		q3K(nx)
	}
	for nx := 1; nx <= 4; nx++ {
		floatKernel512("F32", nx, 32, func(m Mem, z VecVirtual) { VMOVUPS(m, z) })
		floatKernel512("F16", nx, 16, func(m Mem, z VecVirtual) { VCVTPH2PS(m, z) })
		floatKernel512("BF16", nx, 16, func(m Mem, z VecVirtual) {
			VPMOVZXWD(m, z)
			VPSLLD(U8(16), z, z)
		})
	}
	for _, prefetch := range []bool{true, false} {
		floatKernel512Pairs("F32", 32, prefetch, func(m Mem, z VecVirtual) { VMOVUPS(m, z) })
		floatKernel512Pairs("F16", 16, prefetch, func(m Mem, z VecVirtual) { VCVTPH2PS(m, z) })
		floatKernel512Pairs("BF16", 16, prefetch, func(m Mem, z VecVirtual) {
			VPMOVZXWD(m, z)
			VPSLLD(U8(16), z, z)
		})
	}
	floatKernel512Rows16("F32", 32, func(m Mem, z VecVirtual) { VMOVUPS(m, z) })
	floatKernel512Rows16("F16", 16, func(m Mem, z VecVirtual) { VCVTPH2PS(m, z) })
	floatKernel512Rows16("BF16", 16, func(m Mem, z VecVirtual) {
		VPMOVZXWD(m, z)
		VPSLLD(U8(16), z, z)
	})
	floatKernel512Rows4("F32", 32, func(m Mem, z VecVirtual) { VMOVUPS(m, z) })
	floatKernel512Rows4("F16", 16, func(m Mem, z VecVirtual) { VCVTPH2PS(m, z) })
	floatKernel512Rows4("BF16", 16, func(m Mem, z VecVirtual) {
		VPMOVZXWD(m, z)
		VPSLLD(U8(16), z, z)
	})
	for nx := 1; nx <= 4; nx++ {
		q80VNNI(nx)
		q40VNNI(nx)
		q50VNNI(nx)
		q41VNNI(nx)
		q51VNNI(nx)
		iq4NLVNNI(nx)
		for _, typ := range []string{"Q4_0", "Q8_0", "IQ4_NL"} {
			packed16(typ, nx)
		}
	}
	pairQ8()
	for _, lanes := range []int{16, 8} { // AVX-512, AVX2
		for _, nq := range []int{1, 2, 4} {
			if nq == 4 && lanes != 16 { // sixteen chains and a key row pass AVX2's 16 registers
				continue
			}
			attnScores("F32", lanes, nq, func(m Mem, z VecVirtual) { VMOVUPS(m, z) })
			attnScores("F16", lanes, nq, func(m Mem, z VecVirtual) { VCVTPH2PS(m, z) })
		}
		for _, w := range []int{1, 2, 4} {
			attnAccum("F32", lanes, w, 1, nil)
			attnAccum("F16", lanes, w, 1, func(m Mem, z VecVirtual) { VCVTPH2PS(m, z) })
			if 2*(16*w/lanes)+3 <= 16 || lanes == 16 { // two queries' outputs in registers
				attnAccum("F32", lanes, w, 2, func(m Mem, z VecVirtual) { VMOVUPS(m, z) })
				attnAccum("F16", lanes, w, 2, func(m Mem, z VecVirtual) { VCVTPH2PS(m, z) })
			}
			if lanes == 16 { // four queries' outputs in registers
				attnAccum("F32", lanes, w, 4, func(m Mem, z VecVirtual) { VMOVUPS(m, z) })
				attnAccum("F16", lanes, w, 4, func(m Mem, z VecVirtual) { VCVTPH2PS(m, z) })
			}
		}
		attnScoresQ8(lanes)
		attnAccumQ8(lanes, 1)
		attnAccumQ8(lanes, 2)
	}
	prefetch("prefetchLines", false)
	prefetch("prefetchLinesL2", true)
	axpy()
	quant32()
	quantQ8_0()
	quantK()
	Generate()
}

var (
	// VPERMPS indices: elements 0 and 1 (2 and 3) of a vector, each ×8.
	permLo2, permHi2 Mem
	// shiftNibbleLanes shifts the quadwords of a ZMM's lanes 1 and 3 right by 4 (VPSRLVQ):
	// the high nibbles of the blocks broadcast into lanes 0-1 and 2-3.
	shiftNibbleLanes Mem

	mask0F, mask30, maskQ4KScale, maskQ6KScale, absMask, permPack, f127, f1, shiftHigh4 Mem
	// permRows16 puts the 16-row kernels' sums in row order: lane r takes the tree's lane
	// 4·(r%4) + r/4.
	permRows16 Mem

	// mask10 is 0x10 in every byte; iq4nlValues the 16 values of IQ4_NL and IQ4_XS,
	// iq4nlUnsigned the same plus 128.
	mask10, iq4nlValues, iq4nlUnsigned Mem
	// IQ4_XS scales: per-dword shifts of scales_l (4·ib) and scales_h (2·ib), the masks of
	// their fields and the offset 32.
	shiftIQ4L, shiftIQ4H, dwordF, dword3, dword32 Mem
	// Q5_0/Q5_1 high bits: byte j of a broadcast uint32 gets byte j/8 (bitBytes), ORed with
	// every bit but bit j%8 (bitMask), compared with all ones (allOnes).
	bitBytes, bitMask, allOnes Mem
	// mask03 and mask04 are 3 and 4 in every byte, word32 32 in every int16 word.
	mask03, mask04, word32 Mem
)

func constants() {
	absMask = GLOBL("absMask", RODATA|NOPTR)
	for i := 0; i < 32; i += 4 {
		DATA(i, U32(0x7fffffff))
	}
	permPack = GLOBL("permPack", RODATA|NOPTR)
	for i, v := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(v))
	}
	permRows16 = GLOBL("permRows16", RODATA|NOPTR)
	for r := 0; r < 16; r++ {
		DATA(4*r, U32(uint32(4*(r%4)+r/4)))
	}
	shiftHigh4 = GLOBL("shiftHigh4", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(4*uint32(i/4)))
	}
	f127 = GLOBL("f127", RODATA|NOPTR)
	DATA(0, U32(math.Float32bits(127)))
	f1 = GLOBL("f1", RODATA|NOPTR)
	DATA(0, U32(math.Float32bits(1)))

	permLo2 = GLOBL("permLo2", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(i/8))
	}
	shiftNibbleLanes = GLOBL("shiftNibbleLanes", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(8*i, U64(4*uint64(i/2%2)))
	}
	permHi2 = GLOBL("permHi2", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(2+i/8))
	}
	mask0F = GLOBL("mask0F", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x0f0f0f0f0f0f0f0f))
	}
	mask30 = GLOBL("mask30", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x3030303030303030))
	}
	mask10 = GLOBL("mask10", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x1010101010101010))
	}
	iq4nlValues = GLOBL("iq4nlValues", RODATA|NOPTR)
	for i, v := range []int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113} {
		DATA(i, U8(uint8(v)))
	}
	iq4nlUnsigned = GLOBL("iq4nlUnsigned", RODATA|NOPTR)
	for i, v := range []int{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113} {
		DATA(i, U8(uint8(v+128)))
	}
	dwords := func(name string, v func(i int) uint32) Mem {
		m := GLOBL(name, RODATA|NOPTR)
		for i := 0; i < 8; i++ {
			DATA(4*i, U32(v(i)))
		}
		return m
	}
	shiftIQ4L = dwords("shiftIQ4L", func(i int) uint32 { return 4 * uint32(i) })
	shiftIQ4H = dwords("shiftIQ4H", func(i int) uint32 { return 2 * uint32(i) })
	dwordF = dwords("dwordF", func(int) uint32 { return 0xf })
	dword3 = dwords("dword3", func(int) uint32 { return 3 })
	dword32 = dwords("dword32", func(int) uint32 { return 32 })
	bytes := func(name string, v uint64) Mem {
		m := GLOBL(name, RODATA|NOPTR)
		for i := 0; i < 32; i += 8 {
			DATA(i, U64(v))
		}
		return m
	}
	mask03 = bytes("mask03", 0x0303030303030303)
	mask04 = bytes("mask04", 0x0404040404040404)
	word32 = bytes("word32", 0x0020002000200020)
	bitBytes = GLOBL("bitBytes", RODATA|NOPTR)
	for i := 0; i < 32; i++ {
		DATA(i, U8(uint8(i%16/8+2*(i/16))))
	}
	bitMask = GLOBL("bitMask", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x7fbfdfeff7fbfdfe))
	}
	allOnes = GLOBL("allOnes", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0xffffffffffffffff))
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
	x     []Register // start of each activation row
	xo    Register   // offset of the current activation block
	acc   []VecVirtual
	chain [][]VecVirtual // chain[i][k]: independent accumulators of row i (chain[i][0] == acc[i])
}

// xm returns the address disp bytes into the current block of activation row i.
func (s *rowState) xm(i, disp int) Mem {
	return Mem{Base: s.x[i], Index: s.xo, Scale: 1, Disp: disp}
}

// rows emits the row loop shared by all dot kernels. setup emits code once before the row
// loop (constants kept in registers for the whole call); block emits the code of one block
// and the loop advances p by wBlock and the activation offset by xBlock bytes. unroll > 1 adds
// an unrolled main loop of unroll blocks (block is then called with k = 0..unroll-1, at offsets
// k*wBlock and k*xBlock); chains accumulators per activation row are summed at the end of the
// row.
func rows(name string, nx, wBlock, xBlock, unroll, chains int, setup func(), block func(s *rowState, k int)) {
	TEXT(name, NOSPLIT, signature)
	Doc(fmt.Sprintf("%s computes %d activation row(s) against rows weight rows.", name, nx))
	setup()
	w := Load(Param("w"), GP64())
	nrows := Load(Param("rows"), GP64())
	out := Load(Param("out"), GP64())
	s := &rowState{p: GP64(), xo: GP64()}
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

	Label("row")
	TESTQ(nrows, nrows)
	JZ(LabelRef("done"))

	MOVQ(w, s.p)
	XORQ(s.xo, s.xo)
	zero := func() VecVirtual {
		if wideAcc {
			a := ZMM()
			VPXORD(a, a, a)
			return a
		}
		a := YMM()
		VXORPS(a, a, a)
		return a
	}
	for i := 0; i < nx; i++ {
		var c []VecVirtual
		for k := 0; k < chains; k++ {
			c = append(c, zero())
		}
		s.chain = append(s.chain, c)
		s.acc = append(s.acc, c[0])
	}
	cnt := Load(Param("n"), GP64())
	advance := func(blocks int) {
		ADDQ(U32(blocks*wBlock), s.p)
		ADDQ(U32(blocks*xBlock), s.xo)
	}

	if unroll > 1 {
		Label("blocks4")
		CMPQ(cnt, U32(unroll))
		JB(LabelRef("tail"))
		for k := 0; k < unroll; k++ {
			block(s, k)
		}
		advance(unroll)
		SUBQ(U32(unroll), cnt)
		JMP(LabelRef("blocks4"))
	}
	Label("tail")
	TESTQ(cnt, cnt)
	JZ(LabelRef("store"))
	block(s, 0)
	advance(1)
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
		acc := s.acc[i]
		if wideAcc {
			hi := YMM()
			VEXTRACTF64X4(U8(1), acc, hi)
			VADDPS(acc.AsY(), hi, hi)
			acc = hi
		}
		hsumStore(acc, Mem{Base: o})
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

// wideAcc makes rows use ZMM accumulators (the AVX-512 kernels).
var wideAcc bool

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

// load8Of loads 8 weights of a float type into a YMM as float32 (the last 8-block of a row).
var load8Of = map[string]func(Mem, VecVirtual){"F32": loadF32, "F16": loadF16, "BF16": loadBF16}

func loadF32(m Mem, y VecVirtual) { VMOVUPS(m, y) }
func loadF16(m Mem, y VecVirtual) { VCVTPH2PS(m, y) }
func loadBF16(m Mem, y VecVirtual) {
	VPMOVZXWD(m, y)
	VPSLLD(U8(16), y, y)
}

// floatKernel: a block is 8 weights (wBytes8 bytes) against 8 float32 activations. Every
// variant sums in the same order: blocks alternate between two accumulators per activation row
// (two chains hide most of the FMA latency), which are added at the end, so a row's result is
// the same bits whatever the number of activation rows it was computed with.
func floatKernel(typ string, nx, wBytes8 int, load func(Mem, VecVirtual)) {
	name := fmt.Sprintf("dot%sx%d", typ, nx)
	rows(name, nx, wBytes8, 32, 2, 2, func() {}, func(s *rowState, k int) {
		wv := YMM()
		load(Mem{Base: s.p, Disp: k * wBytes8}, wv)
		for i := 0; i < nx; i++ {
			VFMADD231PS(s.xm(i, k*32), wv, s.chain[i][k])
		}
	})
}

// floatPrefetchDistance is how far ahead of its loads (in bytes of the weight row, and past
// it into the next rows, which follow in memory) a float kernel of several activation rows
// asks for its weights. With four multiply-adds per weight vector the loop holds fewer
// weight lines in flight than the one-row kernel, and the hardware prefetchers alone left
// a four-row product of a 110M F32 model's weights at about 40 GB/s where one row streams
// at 50–67: a rand110M forward of four rows (F32) 10.9–11.9 → 9.3–9.8 ms, F16 6.5–7.0 →
// 5.4–5.6 ms; eight F16 rows (the two-row kernel) 12.4–13.6 → 8.1–8.7 ms. 1 KB helped less,
// 8 and 16 KB no more; the one-row kernel gains nothing from it (left without).
const floatPrefetchDistance = 4096

// floatKernel512 is floatKernel with AVX-512: blocks of 16 weights in ZMM registers, two
// chains per activation row alternating over the 16-blocks, and a last 8-block (n odd) in a
// YMM product added to the first chain. As in floatKernel every variant sums in the same
// order, so a row's result has the same bits whatever the number of activation rows. load16
// loads 16 weights from m into a ZMM as float32; the last 8-block uses loadF32/16/BF16.
func floatKernel512(typ string, nx, wBytes8 int, load16 func(Mem, VecVirtual)) {
	load8 := load8Of[typ]
	name := fmt.Sprintf("dot%sx%dAVX512", typ, nx)
	TEXT(name, NOSPLIT, signature)
	Doc(fmt.Sprintf("%s computes %d activation row(s) against rows weight rows (AVX-512).", name, nx))
	w := Load(Param("w"), GP64())
	nrows := Load(Param("rows"), GP64())
	out := Load(Param("out"), GP64())
	s := &rowState{p: GP64(), xo: GP64()}
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
	Label(name + "_row")
	TESTQ(nrows, nrows)
	JZ(LabelRef(name + "_done"))
	chain := make([][2]VecVirtual, nx)
	for i := range chain {
		chain[i] = [2]VecVirtual{ZMM(), ZMM()}
	}
	// The row's products, prefetching the weights ahead for several activation rows.
	floatRow(name, 0, w, nil, s.p, s.xo, GP64(), s.x, chain, ZMM(), YMM(), YMM(), wBytes8, nx >= 2, load16, load8)
	ost := Load(Param("ostride"), GP64())
	SHLQ(U8(2), ost)
	o := GP64()
	MOVQ(out, o)
	for i := 0; i < nx; i++ {
		hi := YMM()
		VEXTRACTF64X4(U8(1), chain[i][0], hi)
		VADDPS(chain[i][0].AsY(), hi, hi)
		hsumStore(hi, Mem{Base: o})
		if i+1 < nx {
			ADDQ(ost, o)
		}
	}
	ws := Load(Param("wstride"), GP64())
	ADDQ(ws, w)
	ADDQ(U8(4), out)
	DECQ(nrows)
	JMP(LabelRef(name + "_row"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// floatKernel512Pairs is floatKernel512 with four activation rows, for two weight rows at a
// time (rows must be even): each activation block is loaded once into a register for both
// weight rows, so a 16-block costs two weight loads, four activation loads and eight FMAs
// instead of two weight loads, eight activation loads and eight FMAs. Each of the eight
// results is summed exactly as floatKernel512 sums it (the same chains, the same order), so
// it has the same bits. Without prefetch (dot…x4PairsCached…) it leaves out the software
// prefetch of the weights 4 KB ahead, for weights another activation group has just read.
func floatKernel512Pairs(typ string, wBytes8 int, prefetch bool, load16 func(Mem, VecVirtual)) {
	const nx = 4
	load8 := load8Of[typ]
	name := fmt.Sprintf("dot%sx4PairsAVX512", typ)
	doc := fmt.Sprintf("%s computes 4 activation rows against rows weight rows, two at a time (AVX-512); rows must be even.", name)
	if !prefetch {
		name = fmt.Sprintf("dot%sx4PairsCachedAVX512", typ)
		doc = fmt.Sprintf("%s is dot%sx4PairsAVX512 without prefetch, for weights in cache.", name, typ)
	}
	w, nrows, out, ws := rowKernelEntry(name, doc)
	s := &rowState{p: GP64(), xo: GP64()}
	x0 := Load(Param("x"), GP64())
	s.x = []Register{x0}
	xs := Load(Param("xstride"), GP64())
	for i := 1; i < nx; i++ {
		xi := GP64()
		LEAQ(Mem{Base: s.x[i-1], Index: xs, Scale: 1}, xi)
		s.x = append(s.x, xi)
	}
	// Named once and reused, for avo's allocator (see floatKernel512Rows16).
	var chain [2][nx][2]VecVirtual
	for r := range chain {
		for i := range chain[r] {
			for k := range chain[r][i] {
				chain[r][i][k] = ZMM()
			}
		}
	}
	wz := [2]VecVirtual{ZMM(), ZMM()}
	xa := [nx]VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}
	wy, t, hi := YMM(), YMM(), YMM()
	hx, tx := XMM(), XMM()
	p1, cnt := GP64(), GP64()

	Label(name + "_row")
	CMPQ(nrows, U8(2))
	JB(LabelRef(name + "_done"))
	MOVQ(w, s.p)
	floatRowPair(name, s.p, p1, ws, s.xo, cnt, s.x, [2][][2]VecVirtual{chain[0][:], chain[1][:]}, wz, xa[:], wy, t, wBytes8, prefetch, load16, load8)
	ost := Load(Param("ostride"), GP64())
	SHLQ(U8(2), ost)
	o := GP64()
	for r := range chain {
		MOVQ(out, o)
		if r == 1 {
			ADDQ(U8(4), o)
		}
		for i := 0; i < nx; i++ {
			acc := chain[r][i][0]
			VEXTRACTF64X4(U8(1), acc, hi)
			VADDPS(acc.AsY(), hi, hi)
			// hsumStore's steps, with the EVEX extract: the registers here may be past X15.
			VEXTRACTF32X4(U8(1), hi, hx)
			VADDPS(hi.AsX(), hx, hx)
			VPERMILPS(U8(0x4e), hx, tx)
			VADDPS(tx, hx, hx)
			VPERMILPS(U8(0xb1), hx, tx)
			VADDSS(tx, hx, hx)
			VMOVSS(hx, Mem{Base: o})
			if i+1 < nx {
				ADDQ(ost, o)
			}
		}
	}
	LEAQ(Mem{Base: w, Index: ws, Scale: 2}, w)
	ADDQ(U8(8), out)
	SUBQ(U8(2), nrows)
	JMP(LabelRef(name + "_row"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// rowKernelEntry emits the entry of a kernel over groups of weight rows: its TEXT and doc, and
// the loads of the parameters it reads first, in this order (w, rows, out, wstride).
func rowKernelEntry(name, doc string) (w, nrows, out, ws Register) {
	TEXT(name, NOSPLIT, signature)
	Doc(doc)
	return Load(Param("w"), GP64()), Load(Param("rows"), GP64()), Load(Param("out"), GP64()), Load(Param("wstride"), GP64())
}

// floatRow emits weight row r's products (from w + r·ws, the parameter n's 8-blocks) with the
// activation rows xs at offset xo: activation row i's in its two chains chains[i], 16-blocks
// alternating between them and a last 8-block into the first, exactly as floatKernel512 sums
// them, the two added into chains[i][0] at the end. With prefetch it asks for the weights
// floatPrefetchDistance ahead, as floatKernel512 does for several activation rows. p, xo and
// cnt are scratch; wz, wy and t take the weights and a product; lbl prefixes its labels.
func floatRow(lbl string, r int, w, ws, p, xo, cnt Register, xs []Register, chains [][2]VecVirtual, wz, wy, t VecVirtual,
	wBytes8 int, prefetch bool, load16, load8 func(Mem, VecVirtual)) {
	if r == 0 {
		MOVQ(w, p)
	} else {
		IMUL3Q(U32(r), ws, p)
		ADDQ(w, p)
	}
	XORQ(xo, xo)
	for i := range chains {
		VPXORD(chains[i][0], chains[i][0], chains[i][0])
		VPXORD(chains[i][1], chains[i][1], chains[i][1])
	}
	Load(Param("n"), cnt)
	xm := func(i, disp int) Mem { return Mem{Base: xs[i], Index: xo, Scale: 1, Disp: disp} }
	block16 := func(k int) {
		load16(Mem{Base: p, Disp: 2 * k * wBytes8}, wz)
		for i := range chains {
			VFMADD231PS(xm(i, 64*k), wz, chains[i][k])
		}
	}
	blocks16Loop(lbl, "_sum", cnt, []Register{p}, xo, wBytes8, prefetch, block16, func() {
		load8(Mem{Base: p}, wy)
		for i := range chains {
			VMULPS(xm(i, 0), wy, t)
			VADDPS(t.AsZ(), chains[i][0], chains[i][0])
		}
	})
	for i := range chains {
		VADDPS(chains[i][1], chains[i][0], chains[i][0])
	}
}

// floatRowPair emits two weight rows' products (from p0 and p1 = p0 + ws, the parameter n's
// 8-blocks) with the activation rows xs at offset xo: weight row j and activation row i in
// the two chains chains[j][i], summed exactly as floatRow sums one row's (each 16-block of
// the two rows loaded once into wz, each activation 16-block once into xa[i % len(xa)] for
// both rows), the two added into chains[j][i][0] at the end. With prefetch it asks for both
// rows' weights floatPrefetchDistance ahead. xo, cnt, wy and t are scratch; lbl prefixes its
// labels.
func floatRowPair(lbl string, p0, p1, ws, xo, cnt Register, xs []Register, chains [2][][2]VecVirtual, wz [2]VecVirtual, xa []VecVirtual, wy, t VecVirtual,
	wBytes8 int, prefetch bool, load16, load8 func(Mem, VecVirtual)) {
	LEAQ(Mem{Base: p0, Index: ws, Scale: 1}, p1)
	XORQ(xo, xo)
	for j := range chains {
		for i := range chains[j] {
			VPXORD(chains[j][i][0], chains[j][i][0], chains[j][i][0])
			VPXORD(chains[j][i][1], chains[j][i][1], chains[j][i][1])
		}
	}
	Load(Param("n"), cnt)
	xm := func(i, disp int) Mem { return Mem{Base: xs[i], Index: xo, Scale: 1, Disp: disp} }
	block16 := func(k int) {
		load16(Mem{Base: p0, Disp: 2 * k * wBytes8}, wz[0])
		load16(Mem{Base: p1, Disp: 2 * k * wBytes8}, wz[1])
		for i := range xs {
			x := xa[i%len(xa)]
			VMOVUPS(xm(i, 64*k), x)
			VFMADD231PS(x, wz[0], chains[0][i][k])
			VFMADD231PS(x, wz[1], chains[1][i][k])
		}
	}
	blocks16Loop(lbl, "_sum", cnt, []Register{p0, p1}, xo, wBytes8, prefetch, block16, func() {
		for j, p := range []Register{p0, p1} {
			load8(Mem{Base: p}, wy)
			for i := range xs {
				VMULPS(xm(i, 0), wy, t)
				VADDPS(t.AsZ(), chains[j][i][0], chains[j][i][0])
			}
		}
	})
	for j := range chains {
		for i := range chains[j] {
			VADDPS(chains[j][i][1], chains[j][i][0], chains[j][i][0])
		}
	}
}

// blocks16Loop emits the float kernels' loop over a row's cnt 8-blocks of weights: 16-blocks in
// pairs (block16(0), block16(1), prefetching each weight pointer of ps floatPrefetchDistance
// ahead when prefetch), then a last 16-block, then a last 8-block (eight), advancing ps by the
// blocks' wBytes8 each and the activations' offset xo by 32 bytes a block; it ends at the
// label lbl+end.
func blocks16Loop(lbl, end string, cnt Register, ps []Register, xo Register, wBytes8 int, prefetch bool, block16 func(k int), eight func()) {
	advance := func(blocks int) {
		for _, p := range ps {
			ADDQ(U32(blocks*wBytes8), p)
		}
		ADDQ(U32(blocks*32), xo)
	}
	Label(lbl + "_pairs")
	CMPQ(cnt, U8(4))
	JB(LabelRef(lbl + "_single"))
	for _, p := range ps {
		for off := 0; prefetch && off < 4*wBytes8; off += 64 {
			PREFETCHT0(Mem{Base: p, Disp: floatPrefetchDistance + off})
		}
	}
	block16(0)
	block16(1)
	advance(4)
	SUBQ(U8(4), cnt)
	JMP(LabelRef(lbl + "_pairs"))

	Label(lbl + "_single")
	CMPQ(cnt, U8(2))
	JB(LabelRef(lbl + "_eight"))
	block16(0)
	advance(2)
	SUBQ(U8(2), cnt)

	Label(lbl + "_eight")
	TESTQ(cnt, cnt)
	JZ(LabelRef(lbl + end))
	eight()

	Label(lbl + end)
}

// rowGroupEnd emits the end of a loop over groups of rows weight rows (a power of two) with one
// result each per activation row: w past the group's rows (of ws bytes), out past their
// results, rows fewer left, back to name+"_group"; then name+"_done", the return. tmp is
// scratch.
func rowGroupEnd(name string, rows int, w, ws, out, nrows, tmp Register) {
	MOVQ(ws, tmp)
	SHLQ(U8(bits.TrailingZeros(uint(rows))), tmp)
	ADDQ(tmp, w)
	ADDQ(U8(4*rows), out)
	SUBQ(U8(rows), nrows)
	JMP(LabelRef(name + "_group"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// shuffleAdd sets l to the sums of the pairs of partial sums that the shuffles lo and hi of a
// and b line up (h is scratch; l and h must be neither a nor b); lanes128 picks VSHUFF32X4
// (128-bit lanes) over VSHUFPS (within lanes). It is a step of the 16-row kernels' tree.
func shuffleAdd(a, b, l, h VecVirtual, lo, hi uint8, lanes128 bool) VecVirtual {
	if lanes128 {
		VSHUFF32X4(U8(lo), b, a, l)
		VSHUFF32X4(U8(hi), b, a, h)
	} else {
		VSHUFPS(U8(lo), b, a, l)
		VSHUFPS(U8(hi), b, a, h)
	}
	VADDPS(h, l, l)
	return l
}

// floatKernel512Rows16 is floatKernel512 with one activation row for 16 weight rows at a time
// (rows must be a multiple of 16): each row's two chains are summed exactly as there, and the
// 16 horizontal sums that end the rows are done together, as a transposition tree of
// 128-bit-lane and in-lane shuffles that adds, for every row, the same pairs of partial sums
// in the same order as floatKernel512's per-row reduction. A row's result therefore has the
// same bits as floatKernel512's, and the horizontal sums, which dominate short rows such as
// attention's 64-wide heads and 16-wide cache blocks, cost 15 shuffle-and-add steps for 16
// rows instead of one reduction per row.
func floatKernel512Rows16(typ string, wBytes8 int, load16 func(Mem, VecVirtual)) {
	load8 := load8Of[typ]
	name := fmt.Sprintf("dot%sx1Rows16AVX512", typ)
	w, nrows, out, ws := rowKernelEntry(name, fmt.Sprintf("%s computes one activation row against rows weight rows, 16 at a time (AVX-512); rows must be a multiple of 16.", name))
	x := Load(Param("x"), GP64())
	p, xo, cnt := GP64(), GP64(), GP64()
	// avo's allocator gives every virtual register a register of its own where lifetimes
	// allow reuse but its greedy order does not find it, so the registers are named once and
	// reused: two sets of chains (a row's result stays in its first chain until its pair is
	// combined), two results per level of the tree, one scratch.
	wz, wy, t, h := ZMM(), YMM(), YMM(), ZMM()
	chains := [2][2]VecVirtual{{ZMM(), ZMM()}, {ZMM(), ZMM()}}
	levels := [3][2]VecVirtual{{ZMM(), ZMM()}, {ZMM(), ZMM()}, {ZMM(), ZMM()}}

	// row emits weight row r's two chains, summed into set's first chain: the vector
	// floatKernel512 reduces.
	row := func(r, set int) VecVirtual {
		floatRow(fmt.Sprintf("%s_r%d", name, r), r, w, ws, p, xo, cnt, []Register{x}, chains[set:set+1], wz, wy, t, wBytes8, false, load16, load8)
		return chains[set][0]
	}
	combine := func(a, b, l VecVirtual, lo, hi uint8, lanes128 bool) VecVirtual {
		return shuffleAdd(a, b, l, h, lo, hi, lanes128)
	}
	// The tree, depth first so that few vectors are live at once, over the rows in order (so
	// that the weights stream from memory in order):
	//   level 1, rows a, b: [a_i + a_(i+8) | b_i + b_(i+8)], i < 8 (128-bit lanes);
	//   level 2: y_i + y_(i+4), i < 4, one row a 128-bit lane;
	//   level 3: x_0 + x_2 and x_1 + x_3 within each lane;
	//   level 4: w_0 + w_1 —
	// for every row the pairs, in the order, of floatKernel512's reduction. It leaves row r's
	// sum in lane 4·(r%4) + r/4; permRows16 puts it in lane r.
	slot := func(r int) VecVirtual { return row(r, r%2) }
	level1 := func(j int) VecVirtual {
		return combine(slot(2*j), slot(2*j+1), levels[0][j%2], 0x44, 0xee, true)
	}
	level2 := func(j int) VecVirtual {
		return combine(level1(2*j), level1(2*j+1), levels[1][j%2], 0x88, 0xdd, true)
	}
	level3 := func(j int) VecVirtual {
		return combine(level2(2*j), level2(2*j+1), levels[2][j%2], 0x44, 0xee, false)
	}

	Label(name + "_group")
	CMPQ(nrows, U8(16))
	JB(LabelRef(name + "_done"))
	sum := combine(level3(0), level3(1), ZMM(), 0x88, 0xdd, false)
	perm := ZMM()
	VMOVUPS(permRows16, perm)
	VPERMPS(sum, perm, sum)
	VMOVUPS(sum, Mem{Base: out})
	rowGroupEnd(name, 16, w, ws, out, nrows, GP64())
}

// floatKernel512Rows4 is floatKernel512 with four activation rows for four weight rows at a
// time (rows must be a multiple of 4): the weight rows go in pairs, each 16-block of the two
// rows loaded once and each activation 16-block loaded once for both (six loads for eight
// multiply-adds, where a row at a time takes ten), every (weight row, activation row) pair
// summed in its two chains exactly as floatKernel512 sums it; and the 16 horizontal sums that
// end the four weight rows are done together by floatKernel512Rows16's transposition tree
// over the 16 pairs, weight row r and activation row i as the tree's row 4·r + i. The tree
// leaves that pair's sum in lane 4·i + r: activation row i's four results are lanes
// 4·i…4·i+3, stored as they are. Every result has the same bits as floatKernel512's; the sums
// cost 15 shuffle-and-add steps for four weight rows where floatKernel512 spends a reduction
// on each of the 16 results, which on short rows (the 256-wide products of a small model)
// cost as much as the products.
func floatKernel512Rows4(typ string, wBytes8 int, load16 func(Mem, VecVirtual)) {
	const nx = 4
	load8 := load8Of[typ]
	name := fmt.Sprintf("dot%sx4Rows4AVX512", typ)
	w, nrows, out, ws := rowKernelEntry(name, fmt.Sprintf("%s computes 4 activation rows against rows weight rows, 4 at a time (AVX-512); rows must be a multiple of 4.", name))
	xs := []Register{Load(Param("x"), GP64())}
	xstride := Load(Param("xstride"), GP64())
	for i := 1; i < nx; i++ {
		xi := GP64()
		LEAQ(Mem{Base: xs[i-1], Index: xstride, Scale: 1}, xi)
		xs = append(xs, xi)
	}
	ost := Load(Param("ostride"), GP64())
	SHLQ(U8(2), ost)
	p0, p1, xo, cnt, o := GP64(), GP64(), GP64(), GP64(), GP64()
	// Registers named once and reused (see floatKernel512Rows16): the chains of the two weight
	// rows being summed, their weights, an activation block, a scratch for the shuffles, two
	// results per level of the tree.
	var chains [2][nx][2]VecVirtual
	for r := range chains {
		for i := range chains[r] {
			chains[r][i] = [2]VecVirtual{ZMM(), ZMM()}
		}
	}
	wz := [2]VecVirtual{ZMM(), ZMM()}
	xa, wy, t, h := ZMM(), YMM(), YMM(), ZMM()
	levels := [3][2]VecVirtual{{ZMM(), ZMM()}, {ZMM(), ZMM()}, {ZMM(), ZMM()}}
	sum := ZMM()

	// pair emits weight rows r and r+1's products with the four activation rows, the pair of
	// weight row r+j and activation row i summed into chains[j][i][0]: the vector
	// floatKernel512 reduces for that pair.
	pair := func(r int) {
		if r == 0 {
			MOVQ(w, p0)
		} else {
			IMUL3Q(U32(r), ws, p0)
			ADDQ(w, p0)
		}
		cs := [2][][2]VecVirtual{chains[0][:], chains[1][:]}
		floatRowPair(fmt.Sprintf("%s_r%d", name, r), p0, p1, ws, xo, cnt, xs, cs, wz, []VecVirtual{xa}, wy, t, wBytes8, true, load16, load8)
	}
	combine := func(a, b, l VecVirtual, lo, hi uint8, lanes128 bool) VecVirtual {
		return shuffleAdd(a, b, l, h, lo, hi, lanes128)
	}

	Label(name + "_group")
	CMPQ(nrows, U8(4))
	JB(LabelRef(name + "_done"))
	// The tree depth first, as floatKernel512Rows16 walks it: tree rows 4r…4r+3 are weight
	// row r's four pairs, so level 1 pairs activation rows 0, 1 and 2, 3 of one weight row,
	// level 2 ends each weight row, level 3 takes weight rows 0, 1 and 2, 3.
	for r := 0; r < 4; r += 2 {
		pair(r)
		for j := range chains {
			l1a := combine(chains[j][0][0], chains[j][1][0], levels[0][0], 0x44, 0xee, true)
			l1b := combine(chains[j][2][0], chains[j][3][0], levels[0][1], 0x44, 0xee, true)
			combine(l1a, l1b, levels[1][j], 0x88, 0xdd, true)
		}
		combine(levels[1][0], levels[1][1], levels[2][r/2], 0x44, 0xee, false)
	}
	combine(levels[2][0], levels[2][1], sum, 0x88, 0xdd, false)
	MOVQ(out, o)
	for i := 0; i < nx; i++ {
		if i == 0 {
			VMOVUPS(sum.AsX(), Mem{Base: o})
		} else {
			VEXTRACTF32X4(U8(i), sum, Mem{Base: o})
		}
		if i+1 < nx {
			ADDQ(ost, o)
		}
	}
	rowGroupEnd(name, 4, w, ws, out, nrows, cnt)
}

// Q8_0 and Q4_0 work on groups of four blocks: the integer sums of the four blocks are
// reduced into one vector [b0 b1 b2 b3 | b0 b1 b2 b3] (one lane per half of each block), so the
// conversion to float and the scaling by d_w·d_x happen once per group.

// group32 emits the per-activation part of a group: isum(k) returns the int32 partial sums of
// block k for activation row i; the sums are reduced, corrected (Q4_0) and accumulated.
// corr is how many times the group's correction words are added (the −8·Σq of Q4_0, twice
// for the −16 of Q5_0).
func group32(s *rowState, nx int, ones, dw4 VecVirtual, corr int, isum func(i, k int) VecVirtual) {
	for i := 0; i < nx; i++ {
		var h [2]VecVirtual
		for pair := 0; pair < 2; pair++ {
			a := isum(i, 2*pair)
			VPMADDWD(ones, a, a)
			b := isum(i, 2*pair+1)
			VPMADDWD(ones, b, b)
			VPHADDD(b, a, a)
			h[pair] = a
		}
		VPHADDD(h[1], h[0], h[0])
		for c := 0; c < corr; c++ {
			VPADDD(s.xm(i, act32Corr), h[0], h[0])
		}
		VCVTDQ2PS(h[0], h[0])
		f := YMM()
		VBROADCASTF128(s.xm(i, act32D), f)
		VMULPS(dw4, f, f)
		VFMADD231PS(h[0], f, s.acc[i])
	}
}

// scales4 loads the f16 scales of four weight blocks stride bytes apart into both lanes of a
// YMM as float32.
func scales4(p Register, stride int) VecVirtual {
	d := halves4(p, 0, stride)
	VINSERTF128(U8(1), d.AsX(), d, d)
	return d
}

// halves4 loads the four f16 at p+disp, stride bytes apart, into the low lane of a YMM as
// float32 (the high lane is zero).
func halves4(p Register, disp, stride int) VecVirtual {
	t := GP32()
	MOVWLZX(Mem{Base: p, Disp: disp}, t)
	d := YMM()
	VMOVD(t, d.AsX())
	for k := 1; k < 4; k++ {
		VPINSRW(U8(k), Mem{Base: p, Disp: disp + k*stride}, d.AsX(), d.AsX())
	}
	VCVTPH2PS(d.AsX(), d.AsX())
	return d
}

// q80: Q8_0 weight blocks {f16 d; int8 q[32]} against groups of four activation blocks.
// int8×int8 goes through VPMADDUBSW as |w| × (x·sign(w)).
func q80(nx int) {
	name := fmt.Sprintf("dotQ8_0x%d", nx)
	var ones VecVirtual
	rowsWithSetup(name, nx, 4*34, act32Group, func() {
		ones = onesW()
	}, func(s *rowState, k int) {
		dw4 := scales4(s.p, 34)
		var aw [4]VecVirtual
		for k := range aw {
			aw[k] = YMM()
			VPABSB(Mem{Base: s.p, Disp: 34*k + 2}, aw[k])
		}
		group32(s, nx, ones, dw4, 0, func(i, k int) VecVirtual {
			t := YMM()
			VMOVDQU(s.xm(i, act32Q+32*k), t)
			VPSIGNB(Mem{Base: s.p, Disp: 34*k + 2}, t, t)
			VPMADDUBSW(t, aw[k], t)
			return t
		})
	})
}

// vpdpbusd emits VPDPBUSD (AVX512_VNNI, which avo does not know): dst += Σ of the four
// products u8(u)·s8(sgn) in each dword.
func vpdpbusd(sgn, u, dst Op) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Operands: []Op{sgn, u, dst},
		Inputs:   []Op{sgn, u, dst},
		Outputs:  []Op{dst},
		ISA:      []string{"AVX512F", "AVX512_VNNI"},
	})
}

// q80VNNI is q80 on AVX-512 with VNNI: two weight blocks per ZMM, and VPDPBUSD multiplies the
// activations made unsigned (q+128) by the signed weights, the excess 128·Σw removed by
// starting each sum at −128·Σw (computed once per weight row for all activation rows). The
// integer sums, 8 dwords per block, are converted and scaled per lane (d_w·d_x of the lane's
// block) into one 16-lane float accumulator per activation row: the same order for every
// number of activation rows.
func q80VNNI(nx int) {
	blockVNNI(fmt.Sprintf("dotQ8_0x%dVNNI", nx), nx, 34, func() {}, func(s *rowState, h int) VecVirtual {
		w := ZMM()
		VMOVDQU(Mem{Base: s.p, Disp: 68*h + 2}, w.AsY())
		VINSERTI64X4(U8(1), Mem{Base: s.p, Disp: 68*h + 36}, w, w)
		return w
	})
}

// nibbleVNNI is q80VNNI for the blocks of sixteen bytes of nibbles (at qsOff in blocks of
// wBlock bytes) of Q4_0, Q5_0 and IQ4_NL: the nibbles of two blocks are unpacked into one ZMM in element order
// (block 2h's low nibbles, its high nibbles, then block 2h+1's) and made signed weights by
// value (−8 for Q4_0, the fifth bits and −16 for Q5_0, the IQ4_NL table's lookup).
func nibbleVNNI(name string, nx, wBlock, qsOff int, setup func(), value func(s *rowState, h int, w VecVirtual)) {
	nibbleVNNIMins(name, nx, wBlock, qsOff, -1, setup, value)
}

// nibbleVNNIMins is nibbleVNNI for blocks with a minimum (see blockVNNIMins).
func nibbleVNNIMins(name string, nx, wBlock, qsOff, minOff int, setup func(), value func(s *rowState, h int, w VecVirtual)) {
	var m0F, shifts VecVirtual
	blockVNNIMins(name, nx, wBlock, minOff, func() {
		t := GP32()
		MOVL(U32(0x0f0f0f0f), t)
		m0F = ZMM()
		VPBROADCASTD(t, m0F)
		shifts = ZMM()
		VMOVDQU64(shiftNibbleLanes, shifts)
		setup()
	}, func(s *rowState, h int) VecVirtual {
		w := ZMM()
		VBROADCASTI32X4(Mem{Base: s.p, Disp: wBlock*(2*h) + qsOff}, w)
		VINSERTI32X4(U8(2), Mem{Base: s.p, Disp: wBlock*(2*h+1) + qsOff}, w, w)
		VINSERTI32X4(U8(3), Mem{Base: s.p, Disp: wBlock*(2*h+1) + qsOff}, w, w)
		VPSRLVQ(shifts, w, w)
		VPANDD(m0F, w, w)
		value(s, h, w)
		return w
	})
}

func q40VNNI(nx int) {
	var eight VecVirtual
	nibbleVNNI(fmt.Sprintf("dotQ4_0x%dVNNI", nx), nx, 18, 2, func() {
		t := GP32()
		MOVL(U32(0x08080808), t)
		eight = ZMM()
		VPBROADCASTD(t, eight)
	}, func(_ *rowState, _ int, w VecVirtual) { VPSUBB(eight, w, w) })
}

// q41VNNI: Q4_1 blocks {f16 d; f16 m; uint8 qs[16]}, the nibbles (0…15) as they are, m·s
// added per block.
func q41VNNI(nx int) {
	nibbleVNNIMins(fmt.Sprintf("dotQ4_1x%dVNNI", nx), nx, 20, 4, 2, func() {}, func(*rowState, int, VecVirtual) {})
}

// q51VNNI: Q5_1 blocks {f16 d; f16 m; uint32 qh; uint8 qs[16]}, the fifth bits from qh as in
// q50VNNI, the quants (0…31) as they are, m·s added per block.
func q51VNNI(nx int) {
	var m10 VecVirtual
	nibbleVNNIMins(fmt.Sprintf("dotQ5_1x%dVNNI", nx), nx, 24, 8, 2, func() {
		t := GP32()
		MOVL(U32(0x10101010), t)
		m10 = ZMM()
		VPBROADCASTD(t, m10)
	}, func(s *rowState, h int, w VecVirtual) {
		lo, hi := GP64(), GP64()
		MOVL(Mem{Base: s.p, Disp: 24*(2*h) + 4}, lo.As32())
		MOVL(Mem{Base: s.p, Disp: 24*(2*h+1) + 4}, hi.As32())
		SHLQ(U8(32), hi)
		ORQ(hi, lo)
		k := K()
		KMOVQ(lo, k)
		b := ZMM()
		VPMOVM2B(k, b)
		VPANDD(m10, b, b)
		VPORD(b, w, w)
	})
}

// q50VNNI: Q5_0 blocks {f16 d; uint32 qh; uint8 qs[16]}, bit i of qh the fifth bit of element
// i: the two blocks' qh make a 64-bit mask whose bit i is byte i of the ZMM (VPMOVM2B).
func q50VNNI(nx int) {
	var m10, sixteen VecVirtual
	nibbleVNNI(fmt.Sprintf("dotQ5_0x%dVNNI", nx), nx, 22, 6, func() {
		t := GP32()
		MOVL(U32(0x10101010), t)
		m10 = ZMM()
		VPBROADCASTD(t, m10)
		sixteen = m10
	}, func(s *rowState, h int, w VecVirtual) {
		lo, hi := GP64(), GP64()
		MOVL(Mem{Base: s.p, Disp: 22*(2*h) + 2}, lo.As32())
		MOVL(Mem{Base: s.p, Disp: 22*(2*h+1) + 2}, hi.As32())
		SHLQ(U8(32), hi)
		ORQ(hi, lo)
		k := K()
		KMOVQ(lo, k)
		b := ZMM()
		VPMOVM2B(k, b)
		VPANDD(m10, b, b)
		VPORD(b, w, w)
		VPSUBB(sixteen, w, w)
	})
}

func iq4NLVNNI(nx int) {
	var values VecVirtual
	nibbleVNNI(fmt.Sprintf("dotIQ4_NLx%dVNNI", nx), nx, 18, 2, func() {
		values = ZMM()
		VBROADCASTI32X4(iq4nlValues, values)
	}, func(_ *rowState, _ int, w VecVirtual) { VPSHUFB(w, values, w) })
}

// blockVNNI is the body of the VNNI kernels over blocks of 32 weights with an f16 scale first,
// wBlock bytes each, in groups of four: weights(s, h) returns the signed weights of blocks 2h
// and 2h+1 in one ZMM, in element order.
func blockVNNI(name string, nx, wBlock int, setup func(), weights func(s *rowState, h int) VecVirtual) {
	blockVNNIMins(name, nx, wBlock, -1, setup, weights)
}

// blockVNNIMins is blockVNNI for blocks with an f16 minimum at minOff (Q4_1, Q5_1; none when
// minOff < 0): each activation row's accumulator also gets m·s of the four blocks (s the
// activation block's sum), in its first four lanes, after the blocks' products.
func blockVNNIMins(name string, nx, wBlock, minOff int, setup func(), weights func(s *rowState, h int) VecVirtual) {
	var c80, zero, idxLo, idxHi VecVirtual
	wideAcc = true
	defer func() { wideAcc = false }()
	rowsWithSetup(name, nx, 4*wBlock, act32Group, func() {
		t := GP32()
		MOVL(U32(0x80808080), t)
		c80 = ZMM()
		VPBROADCASTD(t, c80)
		zero = ZMM()
		VPXORD(zero, zero, zero)
		idxLo, idxHi = ZMM(), ZMM()
		VMOVDQU64(permLo2, idxLo)
		VMOVDQU64(permHi2, idxHi)
		setup()
	}, func(s *rowState, _ int) {
		var wv, neg [2]VecVirtual
		for h := 0; h < 2; h++ {
			wv[h] = weights(s, h)
			n := ZMM()
			VPXORD(n, n, n)
			vpdpbusd(wv[h], c80, n) // 128·Σw per dword
			neg[h] = ZMM()
			VPSUBD(n, zero, neg[h])
		}
		dw := XMM()
		t := GP32()
		MOVWLZX(Mem{Base: s.p}, t)
		VMOVD(t, dw)
		for k := 1; k < 4; k++ {
			VPINSRW(U8(k), Mem{Base: s.p, Disp: k * wBlock}, dw, dw)
		}
		VCVTPH2PS(dw, dw)
		for i := 0; i < nx; i++ {
			f := XMM()
			VMULPS(s.xm(i, act32D), dw, f) // d_w·d_x of the four blocks
			for h, idx := range []VecVirtual{idxLo, idxHi} {
				fh := ZMM()
				VPERMPS(f.AsZ(), idx, fh)
				xu := ZMM()
				VPXORD(s.xm(i, act32Q+64*h), c80, xu)
				sum := ZMM()
				VMOVDQA64(neg[h], sum)
				vpdpbusd(wv[h], xu, sum)
				VCVTDQ2PS(sum, sum)
				VFMADD231PS(sum, fh, s.acc[i])
			}
		}
		if minOff >= 0 {
			mins := halves4(s.p, minOff, wBlock) // the upper lanes of the ZMM are zero
			for i := 0; i < nx; i++ {
				sums := ZMM()
				VMOVUPS(s.xm(i, act32Sum), sums.AsX())
				VFMADD231PS(sums, mins.AsZ(), s.acc[i])
			}
		}
	})
}

// q40: Q4_0 weight blocks {f16 d; uint8 qs[16]} against groups of four activation blocks. The
// nibbles (0..15) multiply the activations directly; the −8 offset comes back as the group's
// precomputed −8·Σq correction.
func q40(nx int) {
	name := fmt.Sprintf("dotQ4_0x%d", nx)
	var ones, shift VecVirtual
	rowsWithSetup(name, nx, 4*18, act32Group, func() {
		ones = onesW()
		shift = YMM()
		VMOVDQU(shiftHigh4, shift)
	}, func(s *rowState, k int) {
		dw4 := scales4(s.p, 18)
		// Both lanes get the 16 bytes; the high lane's dwords shift right by 4, so after the
		// mask the low lane holds the low nibbles (elements 0-15) and the high lane the high
		// nibbles (elements 16-31).
		var q [4]VecVirtual
		for k := range q {
			q[k] = YMM()
			VBROADCASTI128(Mem{Base: s.p, Disp: 18*k + 2}, q[k])
			VPSRLVD(shift, q[k], q[k])
			VPAND(mask0F, q[k], q[k])
		}
		group32(s, nx, ones, dw4, 1, func(i, k int) VecVirtual {
			t := YMM()
			VPMADDUBSW(s.xm(i, act32Q+32*k), q[k], t)
			return t
		})
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

// q4K: Q4_K super-block {f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]} against the K
// activation block.
func q4K(nx int) { kQuant45(fmt.Sprintf("dotQ4_Kx%d", nx), nx, 144, 16, -1) }

// q5K: Q5_K super-block {f16 d; f16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]}: Q4_K
// with a fifth bit per quant, bit sb of qh[l] for element l of sub-block sb.
func q5K(nx int) { kQuant45(fmt.Sprintf("dotQ5_Kx%d", nx), nx, 176, 48, 16) }

// kQuant45 is the kernel of Q4_K (qhOff < 0) and Q5_K: super-blocks of wBlock bytes whose
// nibbles start at qsOff and whose fifth bits, if any, at qhOff.
func kQuant45(name string, nx, wBlock, qsOff, qhOff int) {
	rowsWithSetup(name, nx, wBlock, actKSize, func() {}, func(s *rowState, k int) {
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
		var qh VecVirtual
		if qhOff >= 0 {
			qh = YMM()
			VMOVDQU(Mem{Base: s.p, Disp: qhOff}, qh)
		}
		for sb := 0; sb < 8; sb++ {
			q := YMM()
			VMOVDQU(Mem{Base: s.p, Disp: qsOff + 32*(sb/2)}, q)
			if sb%2 == 1 {
				VPSRLW(U8(4), q, q)
			}
			VPAND(mask0F, q, q)
			if qhOff >= 0 {
				// Bit sb of every byte to bit 4 (the word shifts move no other byte's bit there).
				h := YMM()
				switch {
				case sb < 4:
					VPSLLW(U8(4-sb), qh, h)
				case sb > 4:
					VPSRLW(U8(sb-4), qh, h)
				default:
					VMOVDQA(qh, h)
				}
				VPAND(mask10, h, h)
				VPOR(h, q, q)
			}
			sc := YMM()
			VPSHUFB(maskQ4KScale.Offset(32*sb), scales, sc)
			for i := 0; i < nx; i++ {
				t := YMM()
				VPMADDUBSW(s.xm(i, actKQ+32*sb), q, t)
				VPMADDWD(sc, t, t)
				VPADDD(t, isum[i], isum[i])
			}
		}
		d := blockScale(Mem{Base: s.p})
		dmin := blockScale(Mem{Base: s.p, Disp: 2})
		for i := 0; i < nx; i++ {
			VCVTDQ2PS(isum[i], isum[i])
			f := YMM()
			VBROADCASTSS(s.xm(i, actKD), f)
			VMULPS(d, f, f)
			VFMADD231PS(isum[i], f, s.acc[i])
			m := YMM()
			VPMADDWD(s.xm(i, actKSum32), mins, m.AsX())
			VCVTDQ2PS(m.AsX(), m.AsX())
			VBROADCASTSS(s.xm(i, actKD), f)
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
			VPMADDWD(s.xm(i, actKSum16), sc16, t)
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
					VPMADDUBSW(s.xm(i, actKQ+128*h+32*g), q, t)
					VPMADDWD(sc, t, t)
					VPADDD(t, isum[i], isum[i])
				}
			}
		}
		d := blockScale(Mem{Base: s.p, Disp: 208})
		for i := 0; i < nx; i++ {
			VCVTDQ2PS(isum[i], isum[i])
			f := YMM()
			VBROADCASTSS(s.xm(i, actKD), f)
			VMULPS(d, f, f)
			VFMADD231PS(isum[i], f, s.acc[i])
		}
	})
}

// iq4XS: IQ4_XS super-block {f16 d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128]} against
// the K activation block. Sub-block ib has the 6-bit scale ls = scales_l nibble ib | 2 bits of
// scales_h << 4 (weight d·(ls−32)) and 16 bytes of nibbles indexing the IQ4_NL values: low
// nibbles elements 0-15, high nibbles 16-31. The values are signed, so the products go through
// VPMADDUBSW as |w| × (x·sign(w)), as Q8_0's do.
func iq4XS(nx int) {
	name := fmt.Sprintf("dotIQ4_XSx%d", nx)
	var values VecVirtual
	rowsWithSetup(name, nx, 136, actKSize, func() {
		values = YMM()
		VBROADCASTI128(iq4nlValues, values)
	}, func(s *rowState, k int) {
		// The eight scales ls−32 as int16 words in both lanes.
		lo, hi := YMM(), YMM()
		VPBROADCASTD(Mem{Base: s.p, Disp: 4}, lo)
		VPSRLVD(shiftIQ4L, lo, lo)
		VPAND(dwordF, lo, lo)
		VPBROADCASTW(Mem{Base: s.p, Disp: 2}, hi)
		VPSRLVD(shiftIQ4H, hi, hi)
		VPAND(dword3, hi, hi)
		VPSLLD(U8(4), hi, hi)
		VPOR(hi, lo, lo)
		VPSUBD(dword32, lo, lo)
		VEXTRACTI128(U8(1), lo, hi.AsX())
		VPACKSSDW(hi.AsX(), lo.AsX(), lo.AsX())
		scales := lo
		VINSERTI128(U8(1), scales.AsX(), scales, scales)

		isum := make([]VecVirtual, nx)
		for i := range isum {
			isum[i] = YMM()
			VPXOR(isum[i], isum[i], isum[i])
		}
		for ib := 0; ib < 8; ib++ {
			q := YMM()
			VBROADCASTI128(Mem{Base: s.p, Disp: 8 + 16*ib}, q)
			VPSRLVD(shiftHigh4, q, q)
			VPAND(mask0F, q, q)
			VPSHUFB(q, values, q)
			aq := YMM()
			VPABSB(q, aq)
			sc := YMM()
			VPSHUFB(maskQ4KScale.Offset(32*ib), scales, sc)
			for i := 0; i < nx; i++ {
				t := YMM()
				VMOVDQU(s.xm(i, actKQ+32*ib), t)
				VPSIGNB(q, t, t)
				VPMADDUBSW(t, aq, t)
				VPMADDWD(sc, t, t)
				VPADDD(t, isum[i], isum[i])
			}
		}
		d := blockScale(Mem{Base: s.p})
		for i := 0; i < nx; i++ {
			VCVTDQ2PS(isum[i], isum[i])
			f := YMM()
			VBROADCASTSS(s.xm(i, actKD), f)
			VMULPS(d, f, f)
			VFMADD231PS(isum[i], f, s.acc[i])
		}
	})
}

// nibbles loads the 16 bytes at m as 32 quants in element order: the low nibbles (elements
// 0-15) in the low lane, the high nibbles (16-31) in the high lane.
func nibbles(m Mem) VecVirtual {
	q := YMM()
	VBROADCASTI128(m, q)
	VPSRLVD(shiftHigh4, q, q)
	VPAND(mask0F, q, q)
	return q
}

// highBits returns 0x10 in byte j where bit j of the uint32 at m is set (the fifth bits of
// Q5_0 and Q5_1, in element order).
func highBits(m Mem) VecVirtual {
	h := YMM()
	VPBROADCASTD(m, h)
	VPSHUFB(bitBytes, h, h)
	VPOR(bitMask, h, h)
	VPCMPEQB(allOnes, h, h)
	VPAND(mask10, h, h)
	return h
}

// addMins adds, for Q4_1 and Q5_1, m·s of each of the four blocks of the group to the
// accumulators: mins holds the four m in its low lane (the high lane zero), and s, the
// block's activation sum, is read from the group.
func addMins(s *rowState, nx int, mins VecVirtual) {
	for i := 0; i < nx; i++ {
		sums := YMM()
		VMOVUPS(s.xm(i, act32Sum), sums.AsX())
		VFMADD231PS(sums, mins, s.acc[i])
	}
}

// q4_1: Q4_1 blocks {f16 d; f16 m; uint8 qs[16]} against groups of four activation blocks with
// their sums: d·d_x·Σq·x_q + m·s per block.
func q4_1(nx int) {
	name := fmt.Sprintf("dotQ4_1x%d", nx)
	var ones VecVirtual
	rowsWithSetup(name, nx, 4*20, act32Group, func() {
		ones = onesW()
	}, func(s *rowState, k int) {
		dw4 := scales4(s.p, 20)
		var q [4]VecVirtual
		for k := range q {
			q[k] = nibbles(Mem{Base: s.p, Disp: 20*k + 4})
		}
		group32(s, nx, ones, dw4, 0, func(i, k int) VecVirtual {
			t := YMM()
			VPMADDUBSW(s.xm(i, act32Q+32*k), q[k], t)
			return t
		})
		addMins(s, nx, halves4(s.p, 2, 20))
	})
}

// q5: Q5_0 blocks {f16 d; uint32 qh; uint8 qs[16]} (quants q−16, the offset coming back as
// twice Q4_0's −8·Σq correction) and, withMin, Q5_1 blocks {f16 d; f16 m; uint32 qh; uint8
// qs[16]} (d·q + m, as Q4_1).
func q5(nx int, withMin bool) {
	name, size, hOff := fmt.Sprintf("dotQ5_0x%d", nx), 22, 2
	if withMin {
		name, size, hOff = fmt.Sprintf("dotQ5_1x%d", nx), 24, 4
	}
	var ones VecVirtual
	rowsWithSetup(name, nx, 4*size, act32Group, func() {
		ones = onesW()
	}, func(s *rowState, k int) {
		dw4 := scales4(s.p, size)
		var q [4]VecVirtual
		for k := range q {
			q[k] = nibbles(Mem{Base: s.p, Disp: size*k + hOff + 4})
			VPOR(highBits(Mem{Base: s.p, Disp: size*k + hOff}), q[k], q[k])
		}
		corr := 2
		if withMin {
			corr = 0
		}
		group32(s, nx, ones, dw4, corr, func(i, k int) VecVirtual {
			t := YMM()
			VPMADDUBSW(s.xm(i, act32Q+32*k), q[k], t)
			return t
		})
		if withMin {
			addMins(s, nx, halves4(s.p, 2, size))
		}
	})
}

// iq4NL: IQ4_NL blocks {f16 d; uint8 qs[16]}, nibbles indexing the sixteen IQ4_NL values,
// signed, multiplied as |w| × (x·sign(w)).
func iq4NL(nx int) {
	name := fmt.Sprintf("dotIQ4_NLx%d", nx)
	var ones VecVirtual
	rowsWithSetup(name, nx, 4*18, act32Group, func() {
		ones = onesW()
	}, func(s *rowState, k int) {
		dw4 := scales4(s.p, 18)
		values := YMM()
		VBROADCASTI128(iq4nlValues, values)
		var q [4]VecVirtual
		for k := range q {
			q[k] = nibbles(Mem{Base: s.p, Disp: 18*k + 2})
			VPSHUFB(q[k], values, q[k])
		}
		group32(s, nx, ones, dw4, 0, func(i, k int) VecVirtual {
			t, a := YMM(), YMM()
			VMOVDQU(s.xm(i, act32Q+32*k), t)
			VPSIGNB(q[k], t, t)
			VPABSB(q[k], a)
			VPMADDUBSW(t, a, t)
			return t
		})
	})
}

// q2K: Q2_K super-block {uint8 scales[16]; uint8 qs[64]; f16 d; f16 dmin} against the K
// activation block. Sixteen sub-blocks of 16, each with a 4-bit scale (low nibble) and min
// (high nibble); quant l of group j of half n is bits 2j..2j+1 of qs[32n+l], element
// 128n+32j+l, in sub-block 8n+2j+l/16: the scale layout of Q6_K.
func q2K(nx int) {
	name := fmt.Sprintf("dotQ2_Kx%d", nx)
	rowsWithSetup(name, nx, 84, actKSize, func() {}, func(s *rowState, k int) {
		raw := XMM()
		VMOVDQU(Mem{Base: s.p}, raw)
		sc16, mn16 := YMM(), YMM()
		VPAND(mask0F.Offset(0), raw, sc16.AsX())
		VPMOVZXBW(sc16.AsX(), sc16)
		VPSRLW(U8(4), raw, mn16.AsX())
		VPAND(mask0F.Offset(0), mn16.AsX(), mn16.AsX())
		VPMOVZXBW(mn16.AsX(), mn16)
		scLo, scHi := YMM(), YMM()
		VPERMQ(U8(0x44), sc16, scLo)
		VPERMQ(U8(0xee), sc16, scHi)
		isum := make([]VecVirtual, nx)
		for i := range isum {
			isum[i] = YMM()
			VPXOR(isum[i], isum[i], isum[i])
		}
		for h := 0; h < 2; h++ {
			for g := 0; g < 4; g++ {
				q := YMM()
				VMOVDQU(Mem{Base: s.p, Disp: 16 + 32*h}, q)
				if g > 0 {
					VPSRLW(U8(2*g), q, q)
				}
				VPAND(mask03, q, q)
				sc := YMM()
				src := scLo
				if h == 1 {
					src = scHi
				}
				VPSHUFB(maskQ6KScale.Offset(32*g), src, sc)
				for i := 0; i < nx; i++ {
					t := YMM()
					VPMADDUBSW(s.xm(i, actKQ+128*h+32*g), q, t)
					VPMADDWD(sc, t, t)
					VPADDD(t, isum[i], isum[i])
				}
			}
		}
		d := blockScale(Mem{Base: s.p, Disp: 80})
		dmin := blockScale(Mem{Base: s.p, Disp: 82})
		for i := 0; i < nx; i++ {
			VCVTDQ2PS(isum[i], isum[i])
			f := YMM()
			VBROADCASTSS(s.xm(i, actKD), f)
			VMULPS(d, f, f)
			VFMADD231PS(isum[i], f, s.acc[i])
			m := YMM()
			VPMADDWD(s.xm(i, actKSum16), mn16, m)
			VCVTDQ2PS(m, m)
			VBROADCASTSS(s.xm(i, actKD), f)
			VMULPS(dmin, f, f)
			VFNMADD231PS(m, f, s.acc[i])
		}
	})
}

// q3K: Q3_K super-block {uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; f16 d} against the K
// activation block. Quants are 2 low bits (laid out as Q2_K's) and a high bit, bit 4n+j of
// hmask[l]; the value is (low | high<<2) − 4, so the kernel multiplies the unsigned low | high<<2
// and starts each sum at −4·Σ scale·sum16, as Q6_K does with its −32. The sixteen 6-bit
// scales (minus 32) are packed as llama.cpp's: low nibbles in bytes 0-7, high bits in 8-11.
func q3K(nx int) {
	name := fmt.Sprintf("dotQ3_Kx%d", nx)
	rowsWithSetup(name, nx, 110, actKSize, func() {}, func(s *rowState, k int) {
		a0, a1, tmp := GP32(), GP32(), GP32()
		MOVL(Mem{Base: s.p, Disp: 96}, a0)
		MOVL(Mem{Base: s.p, Disp: 100}, a1)
		MOVL(Mem{Base: s.p, Disp: 104}, tmp)
		sc8 := XMM()
		for w := 0; w < 4; w++ {
			// Word w: (a & 0x0f0f0f0f) | ((tmp >> 2w) & 0x03030303) << 4, a = a0, a1, a0>>4, a1>>4.
			v, h := GP32(), GP32()
			if w%2 == 0 {
				MOVL(a0, v)
			} else {
				MOVL(a1, v)
			}
			if w >= 2 {
				SHRL(U8(4), v)
			}
			ANDL(U32(0x0f0f0f0f), v)
			MOVL(tmp, h)
			if w > 0 {
				SHRL(U8(2*w), h)
			}
			ANDL(U32(0x03030303), h)
			SHLL(U8(4), h)
			ORL(h, v)
			if w == 0 {
				VMOVD(v, sc8)
			} else {
				VPINSRD(U8(w), v, sc8, sc8)
			}
		}
		sc16 := YMM()
		VPMOVZXBW(sc8, sc16)
		VPSUBW(word32, sc16, sc16)
		isum := make([]VecVirtual, nx)
		for i := range isum {
			t := YMM()
			VPMADDWD(s.xm(i, actKSum16), sc16, t)
			VPSLLD(U8(2), t, t)
			isum[i] = YMM()
			VPXOR(isum[i], isum[i], isum[i])
			VPSUBD(t, isum[i], isum[i])
		}
		scLo, scHi := YMM(), YMM()
		VPERMQ(U8(0x44), sc16, scLo)
		VPERMQ(U8(0xee), sc16, scHi)
		hm := YMM()
		VMOVDQU(Mem{Base: s.p}, hm)
		for h := 0; h < 2; h++ {
			for g := 0; g < 4; g++ {
				q := YMM()
				VMOVDQU(Mem{Base: s.p, Disp: 32 + 32*h}, q)
				if g > 0 {
					VPSRLW(U8(2*g), q, q)
				}
				VPAND(mask03, q, q)
				// Bit b = 4h+g of every hmask byte to bit 2 (a word shift of at most 5 moves
				// no other byte's bit there).
				hb := YMM()
				switch b := 4*h + g; {
				case b < 2:
					VPSLLW(U8(2-b), hm, hb)
				case b > 2:
					VPSRLW(U8(b-2), hm, hb)
				default:
					VMOVDQA(hm, hb)
				}
				VPAND(mask04, hb, hb)
				VPOR(hb, q, q)
				sc := YMM()
				src := scLo
				if h == 1 {
					src = scHi
				}
				VPSHUFB(maskQ6KScale.Offset(32*g), src, sc)
				for i := 0; i < nx; i++ {
					t := YMM()
					VPMADDUBSW(s.xm(i, actKQ+128*h+32*g), q, t)
					VPMADDWD(sc, t, t)
					VPADDD(t, isum[i], isum[i])
				}
			}
		}
		d := blockScale(Mem{Base: s.p, Disp: 108})
		for i := 0; i < nx; i++ {
			VCVTDQ2PS(isum[i], isum[i])
			f := YMM()
			VBROADCASTSS(s.xm(i, actKD), f)
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

// quantScale emits the absolute maximum amax of nvec YMM of float32 at x and returns the block
// scale d (XMM, lane 0) and the inverse 127/amax broadcast (0 when amax is 0). For the blocks
// of 32 (half) d is amax/127 rounded to half precision and back, llama.cpp's Q8_0 scale; for
// the blocks of 256 it is 1/(127/amax), llama.cpp's Q8_K scale (0 when amax is 0, the inverse
// of an infinite 127/0).
func quantScale(x Register, nvec int, half bool) (d, id VecVirtual) {
	am := YMM()
	VMOVUPS(absMask, am)
	m := YMM()
	VANDPS(Mem{Base: x}, am, m)
	for v := 1; v < nvec; v++ {
		t := YMM()
		VANDPS(Mem{Base: x, Disp: 32 * v}, am, t)
		VMAXPS(t, m, m)
	}
	hi := XMM()
	VEXTRACTF128(U8(1), m, hi)
	VMAXPS(m.AsX(), hi, hi)
	t := XMM()
	VPERMILPS(U8(0x4e), hi, t)
	VMAXPS(t, hi, hi)
	VPERMILPS(U8(0xb1), hi, t)
	VMAXSS(t, hi, hi)
	id = YMM()
	VMOVSS(f127, id.AsX())
	VDIVSS(hi, id.AsX(), id.AsX())
	d = XMM()
	if half {
		VDIVSS(f127, hi, d)
		VCVTPS2PH(U8(0), d, d) // to nearest, ties to even
		VCVTPH2PS(d, d)
	} else {
		VMOVSS(f1, d)
		VDIVSS(id.AsX(), d, d)
	}
	zero := XMM()
	VXORPS(zero, zero, zero)
	VCMPSS(U8(4), zero, hi, hi) // amax != 0 (NEQ_UQ: all ones)
	VANDPS(hi, id.AsX(), id.AsX())
	VBROADCASTSS(id.AsX(), id)
	return d, id
}

// quant32x emits the quantisation of the 32 float32 at x+off with inverse scale id: it stores
// the 32 int8 at dst and returns the sums of q over elements 0-15 and 16-31 as GP registers.
func quant32x(x Register, off int, id VecVirtual, dst Mem) (s0, s1 Register) {
	var v [4]VecVirtual
	for k := range v {
		v[k] = YMM()
		VMULPS(Mem{Base: x, Disp: off + 32*k}, id, v[k])
		VCVTPS2DQ(v[k], v[k]) // round to nearest, ties to even
	}
	sums := func(a, b VecVirtual) Register {
		t := YMM()
		VPADDD(a, b, t)
		h := XMM()
		VEXTRACTI128(U8(1), t, h)
		VPADDD(t.AsX(), h, h)
		u := XMM()
		VPSHUFD(U8(0x4e), h, u)
		VPADDD(u, h, h)
		VPSHUFD(U8(0xb1), h, u)
		VPADDD(u, h, h)
		r := GP32()
		VMOVD(h, r)
		return r
	}
	s0 = sums(v[0], v[1])
	s1 = sums(v[2], v[3])
	VPACKSSDW(v[1], v[0], v[0])
	VPACKSSDW(v[3], v[2], v[2])
	VPACKSSWB(v[2], v[0], v[0])
	p := YMM()
	VMOVDQU(permPack, p)
	VPERMD(v[0], p, v[0])
	VMOVDQU(v[0], dst)
	return s0, s1
}

// countdown emits a loop that runs body's instructions nb times (nb counting down to 0), then
// returns.
func countdown(nb Register, body func()) {
	Label("block")
	TESTQ(nb, nb)
	JZ(LabelRef("done"))
	body()
	DECQ(nb)
	JMP(LabelRef("block"))
	Label("done")
	VZEROUPPER()
	RET()
}

// quant32: func(x *float32, nb int, dst *byte) quantises nb blocks of 32 into groups of four
// (see act.go). The bytes of unused blocks of a last partial group are left as they are.
func quant32() {
	TEXT("quant32", NOSPLIT, "func(x *float32, nb int, dst *byte)")
	Doc("quant32 quantises nb blocks of 32 float32 at x into the group layout at dst.")
	x := Load(Param("x"), GP64())
	nb := Load(Param("nb"), GP64())
	g := Load(Param("dst"), GP64())
	k := GP64()
	XORQ(k, k)
	countdown(nb, func() {
		d, id := quantScale(x, 4, true)
		VMOVSS(d, Mem{Base: g, Index: k, Scale: 4})
		q := GP64()
		MOVQ(k, q)
		SHLQ(U8(5), q)
		s0, s1 := quant32x(x, 0, id, Mem{Base: g, Index: q, Scale: 1, Disp: act32Q})
		ADDL(s1, s0)
		SHLL(U8(3), s0)
		NEGL(s0)
		MOVL(s0, Mem{Base: g, Index: k, Scale: 4, Disp: act32Corr})
		MOVL(U32(0), Mem{Base: g, Index: k, Scale: 4, Disp: act32Corr + 16})
		ADDQ(U8(128), x)
		INCQ(k)
		CMPQ(k, U8(4))
		JNE(LabelRef("next"))
		XORQ(k, k)
		ADDQ(U32(act32Group), g)
		Label("next")
	})
}

// quantQ8_0: func(x *float32, nb int, q *byte, d *uint16) quantises nb blocks of 32 as
// llama.cpp's x86 Q8_0 quantiser does (QuantizeQ8_0 in package kernels): the 32 bytes of block
// b at q+32b, its half-precision scale at d+b.
func quantQ8_0() {
	TEXT("quantQ8_0", NOSPLIT, "func(x *float32, nb int, q *byte, d *uint16)")
	Doc("quantQ8_0 quantises nb blocks of 32 float32 at x to Q8_0: 32 bytes a block at q, a half-precision scale a block at d.")
	x := Load(Param("x"), GP64())
	nb := Load(Param("nb"), GP64())
	q := Load(Param("q"), GP64())
	dp := Load(Param("d"), GP64())
	countdown(nb, func() {
		d, id := quantScale(x, 4, true)
		VCVTPS2PH(U8(0), d, d) // exact: d is a half's value
		VPEXTRW(U8(0), d, Mem{Base: dp})
		quant32x(x, 0, id, Mem{Base: q})
		ADDQ(U8(128), x)
		ADDQ(U8(32), q)
		ADDQ(U8(2), dp)
	})
}

// quantK: func(x *float32, nb int, dst *byte) quantises nb super-blocks of 256.
func quantK() {
	TEXT("quantK", NOSPLIT, "func(x *float32, nb int, dst *byte)")
	Doc("quantK quantises nb blocks of 256 float32 at x into the K activation layout at dst.")
	x := Load(Param("x"), GP64())
	nb := Load(Param("nb"), GP64())
	dst := Load(Param("dst"), GP64())
	countdown(nb, func() {
		d, id := quantScale(x, 32, false)
		VMOVSS(d, Mem{Base: dst})
		for c := 0; c < 8; c++ {
			s0, s1 := quant32x(x, 128*c, id, Mem{Base: dst, Disp: actKQ + 32*c})
			MOVW(s0.(GPVirtual).As16(), Mem{Base: dst, Disp: actKSum16 + 4*c})
			MOVW(s1.(GPVirtual).As16(), Mem{Base: dst, Disp: actKSum16 + 4*c + 2})
			ADDL(s1, s0)
			MOVW(s0.(GPVirtual).As16(), Mem{Base: dst, Disp: actKSum32 + 2*c})
		}
		ADDQ(U32(1024), x)
		ADDQ(U32(actKSize), dst)
	})
}

// packedParams loads packedSignature's parameters: the weights, the group count, out, the nx
// activation rows' addresses, ostride in bytes and a group's bytes (nb blocks of blockBytes).
func packedParams(nx, blockBytes int) (w, groups, out Register, xs []Register, ostride, groupBytes Register) {
	w = Load(Param("w"), GP64())
	groups = Load(Param("groups"), GP64())
	out = Load(Param("out"), GP64())
	xs = stridedParams("x", "xstride", nx)
	ostride = Load(Param("ostride"), GP64())
	SHLQ(U8(2), ostride)
	groupBytes = Load(Param("nb"), GP64())
	IMUL3Q(U32(blockBytes), groupBytes, groupBytes)
	return w, groups, out, xs, ostride, groupBytes
}

// packedBlocks emits the walk over a packed group's nb blocks (the parameter nb): p from w,
// the activation offset xo from 0, four blocks per iteration while four are left, then the
// last one to three, each emitted by block(k) for the k-th block from p and from xo's group of
// four; it ends by jumping to or falling into name+"_store".
func packedBlocks(name string, blockBytes int, w, p, xo, cnt Register, block func(k int)) {
	MOVQ(w, p)
	XORQ(xo, xo)
	Load(Param("nb"), cnt)
	Label(name + "_quad")
	CMPQ(cnt, U8(4))
	JB(LabelRef(name + "_tail"))
	for k := 0; k < 4; k++ {
		block(k)
	}
	ADDQ(U32(4*blockBytes), p)
	ADDQ(U32(act32Group), xo)
	SUBQ(U8(4), cnt)
	JMP(LabelRef(name + "_quad"))
	Label(name + "_tail")
	for k := 0; k < 3; k++ {
		CMPQ(cnt, U8(k+1))
		JB(LabelRef(name + "_store"))
		block(k)
	}
}

// pairQ8 computes 4 activation rows against pairs of consecutive groups of 16 packed Q8_0
// rows: each activation quad is broadcast once into a register and multiplied with both
// groups' weights, where packed16 broadcasts it from memory once per group (a VPDPBUSD with a
// broadcast memory operand costs more than one with a register: on weights in L1, taking
// the broadcasts out ran 23 % faster). Every row's arithmetic is packed16's, in its order,
// so the results are the same bits. groups counts pairs; the pair's results for activation
// row i are 32 floats at out + i·ostride, group after group.
func pairQ8() {
	const chunks, blockBytes, nx = 8, 32 + 64*8, 4
	name := "dotQ8_0P32x4VNNI"
	TEXT(name, NOSPLIT, packedSignature)
	Doc(name + " computes 4 activation rows against pairs of groups of 16 packed Q8_0 rows (AVX-512 VNNI).")
	w, groups, out, xs, ostride, groupBytes := packedParams(nx, blockBytes)
	acc := [2][nx]VecVirtual{}
	for g := range acc {
		for i := range acc[g] {
			acc[g][i] = ZMM()
		}
	}
	var wv [2][chunks]VecVirtual
	for g := range wv {
		for j := range wv[g] {
			wv[g][j] = ZMM()
		}
	}
	dw := [2]VecVirtual{ZMM(), ZMM()}
	isum := [2]VecVirtual{ZMM(), ZMM()}
	isum2 := [2]VecVirtual{ZMM(), ZMM()} // the odd chunks' chains (see packed16)
	bx, f := ZMM(), ZMM()
	p, xo, cnt, o := GP64(), GP64(), GP64(), GP64()

	block := func(k int) {
		for g := 0; g < 2; g++ {
			base := Mem{Base: p, Disp: k * blockBytes}
			if g == 1 {
				base = Mem{Base: p, Index: groupBytes, Scale: 1, Disp: k * blockBytes}
			}
			VCVTPH2PS(base, dw[g])
			for c := 0; c < chunks; c++ {
				m := base
				m.Disp += 32 + 64*c
				VMOVDQU64(m, wv[g][c])
			}
		}
		for i := 0; i < nx; i++ {
			xm := func(disp int) Mem { return Mem{Base: xs[i], Index: xo, Scale: 1, Disp: disp} }
			VPBROADCASTD(xm(act32Corr+4*k), isum[0])
			VPSLLD(U8(4), isum[0], isum[0]) // −128·Σq
			VMOVDQA64(isum[0], isum[1])
			VPXORD(isum2[0], isum2[0], isum2[0])
			VPXORD(isum2[1], isum2[1], isum2[1])
			for j := 0; j < chunks; j++ {
				VPBROADCASTD(xm(act32Q+32*k+4*j), bx)
				for g := 0; g < 2; g++ {
					dst := isum[g]
					if j%2 == 1 {
						dst = isum2[g]
					}
					Instruction(&ir.Instruction{Opcode: "VPDPBUSD",
						Operands: []Op{bx, wv[g][j], dst}, Inputs: []Op{bx, wv[g][j], dst}, Outputs: []Op{dst},
						ISA: []string{"AVX512F", "AVX512_VNNI"}})
				}
			}
			for g := 0; g < 2; g++ {
				VPADDD(isum2[g], isum[g], isum[g])
				VCVTDQ2PS(isum[g], f)
				VMULPS_BCST(xm(act32D+4*k), dw[g], isum[g]) // d_w·d_x, reusing isum
				VFMADD231PS(f, isum[g], acc[g][i])
			}
		}
	}

	Label(name + "_pair")
	TESTQ(groups, groups)
	JZ(LabelRef(name + "_done"))
	for g := range acc {
		for i := range acc[g] {
			VPXORD(acc[g][i], acc[g][i], acc[g][i])
		}
	}
	packedBlocks(name, blockBytes, w, p, xo, cnt, block)
	rows := make([][]VecVirtual, nx)
	for i := range rows {
		rows[i] = []VecVirtual{acc[0][i], acc[1][i]}
	}
	packedStore(name, name+"_pair", rows, w, groups, out, o, ostride, groupBytes)
}

// packedStore emits the end of a packed kernel's loop over its calls' groups (name+"_store",
// where packedBlocks ends): each activation row i's accumulators rows[i], one per group of 16
// weight rows taken at once, stored side by side at out + i·ostride (o the running pointer);
// then w and out past those groups, one call's group (or pair) fewer, and back to loop; and
// name+"_done", the return.
func packedStore(name, loop string, rows [][]VecVirtual, w, groups, out, o, ostride, groupBytes Register) {
	Label(name + "_store")
	MOVQ(out, o)
	for i, accs := range rows {
		for g, a := range accs {
			VMOVUPS(a, Mem{Base: o, Disp: 64 * g})
		}
		if i+1 < len(rows) {
			ADDQ(ostride, o)
		}
	}
	for range rows[0] {
		ADDQ(groupBytes, w)
	}
	ADDQ(U8(64*len(rows[0])), out)
	DECQ(groups)
	JMP(LabelRef(loop))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// packedSignature is the signature of the kernels over rows packed in groups of 16
// (packed.go): groups consecutive groups of nb blocks each, their 16 results per activation
// row stored at out (+ i·ostride floats for activation row i), 16 floats per group.
const packedSignature = "func(w *byte, groups, nb int, x *byte, xstride int, out *float32, ostride int)"

// packed16 computes nx activation rows against weights packed 16 rows to a group
// (packed.go): per block, the 16 rows' f16 scales (32 bytes), then chunks of 64 bytes, each
// holding four bytes of every row in the row's dword lane. One VPDPBUSD multiplies four
// unsigned weights of every row by four signed activation quants broadcast to every lane;
// eight make each row's integer sum of the block in its own lane, started at the activation
// block's correction for the weights' offset. The sums are converted and scaled by d_w·d_x into
// one accumulator per activation row, block after block — the same order for every number of
// activation rows, so every batch gets the same bits. Per type:
//
//	Q4_0: four chunks of quant bytes; a byte's low nibble is element j, its high nibble
//	      element j+16, both 0…15 (the weight plus 8): start −8·Σq.
//	IQ4_NL: Q4_0's chunks; each nibble indexes the IQ4_NL values plus 128 (VPSHUFB): start
//	      −128·Σq.
//	Q8_0: eight chunks of the quants plus 128 (stored so): start −128·Σq.
func packed16(typ string, nx int) {
	chunks, nibbles := 4, true
	if typ == "Q8_0" {
		chunks, nibbles = 8, false
	}
	blockBytes := 32 + 64*chunks
	name := fmt.Sprintf("dot%sP16x%dVNNI", typ, nx)
	TEXT(name, NOSPLIT, packedSignature)
	Doc(fmt.Sprintf("%s computes %d activation row(s) against groups of 16 packed %s rows (AVX-512 VNNI).", name, nx, typ))
	w, groups, out, xs, ostride, groupBytes := packedParams(nx, blockBytes)
	var m0F, table VecVirtual
	if nibbles {
		m0F = ZMM()
		t := GP32()
		MOVL(U32(0x0f0f0f0f), t)
		VPBROADCASTD(t, m0F)
	}
	if typ == "IQ4_NL" {
		table = ZMM()
		VBROADCASTI32X4(iq4nlUnsigned, table)
	}
	acc := make([]VecVirtual, nx)
	for i := range acc {
		acc[i] = ZMM()
	}
	// wv[j] is the weights of the block's elements elem[j]…elem[j]+3, one row per lane.
	wv := make([]VecVirtual, 8)
	for j := range wv {
		wv[j] = ZMM()
	}
	elem := make([]int, 8)
	for j := range elem {
		if nibbles {
			elem[j] = 4*(j/2) + 16*(j%2) // chunk j/2, low (even j) or high nibbles
		} else {
			elem[j] = 4 * j
		}
	}
	dw, isum, isum2, f := ZMM(), ZMM(), ZMM(), ZMM()
	p, xo, cnt, o := GP64(), GP64(), GP64(), GP64()

	// block emits block k (0…3) of the activation group at xo, the weights at p + k·blockBytes.
	block := func(k int) {
		base := k * blockBytes
		VCVTPH2PS(Mem{Base: p, Disp: base}, dw)
		for c := 0; c < chunks; c++ {
			m := Mem{Base: p, Disp: base + 32 + 64*c}
			if !nibbles {
				VMOVDQU64(m, wv[c])
				continue
			}
			lo, hi := wv[2*c], wv[2*c+1]
			VMOVDQU64(m, hi)
			VPANDD(m0F, hi, lo)
			VPSRLW(U8(4), hi, hi)
			VPANDD(m0F, hi, hi)
			if table != nil {
				VPSHUFB(lo, table, lo)
				VPSHUFB(hi, table, hi)
			}
		}
		for i := 0; i < nx; i++ {
			xm := func(disp int) Mem { return Mem{Base: xs[i], Index: xo, Scale: 1, Disp: disp} }
			VPBROADCASTD(xm(act32Corr+4*k), isum) // −8·Σq of the activation block
			if typ != "Q4_0" {
				VPSLLD(U8(4), isum, isum) // −128·Σq
			}
			// Two chains, even and odd j, added at the end: the integer sum is the same, and
			// a row's eight dependent VPDPBUSD no longer wait on each other's latency.
			VPXORD(isum2, isum2, isum2)
			for j := range wv {
				q := xm(act32Q + 32*k + elem[j])
				dst := isum
				if j%2 == 1 {
					dst = isum2
				}
				Instruction(&ir.Instruction{Opcode: "VPDPBUSD", Suffixes: []string{"BCST"},
					Operands: []Op{q, wv[j], dst}, Inputs: []Op{q, wv[j], dst}, Outputs: []Op{dst},
					ISA: []string{"AVX512F", "AVX512_VNNI"}})
			}
			VPADDD(isum2, isum, isum)
			VCVTDQ2PS(isum, f)
			VMULPS_BCST(xm(act32D+4*k), dw, isum) // d_w·d_x, reusing isum
			VFMADD231PS(f, isum, acc[i])
		}
	}

	Label(name + "_group")
	TESTQ(groups, groups)
	JZ(LabelRef(name + "_done"))
	for i := range acc {
		VPXORD(acc[i], acc[i], acc[i])
	}
	packedBlocks(name, blockBytes, w, p, xo, cnt, block)
	rows := make([][]VecVirtual, nx)
	for i := range rows {
		rows[i] = []VecVirtual{acc[i]}
	}
	packedStore(name, name+"_group", rows, w, groups, out, o, ostride, groupBytes)
}

// stridedParams loads the pointer parameter base and, for n > 1, the byte stride parameter
// stride, and returns n registers: the pointer and the n−1 pointers each stride after the one
// before.
func stridedParams(base, stride string, n int) []Register {
	ps := []Register{Load(Param(base), GP64())}
	if n > 1 {
		st := Load(Param(stride), GP64())
		for j := 1; j < n; j++ {
			pj := GP64()
			LEAQ(Mem{Base: ps[j-1], Index: st, Scale: 1}, pj)
			ps = append(ps, pj)
		}
	}
	return ps
}

// attnScores writes the attention scores of nq queries (1, 2 or 4) against a block of keys
// stored transposed (cache.Span.KHead: HeadDim rows of BlockSize values): out[r] = Σ_d
// q[d]·k[d][r] for r < bs, lanes keys at a time (16: AVX-512, 8: AVX2), each key in its own
// lane, q[d] broadcast. Four chains a query take d by d mod 4 and are summed as
// (c0+c1)+(c2+c3): no horizontal sums at all. hd must be a multiple of 4, bs of lanes; bstride
// is the bytes of one row. Two queries are the query heads of one key/value head under
// grouped-query attention: each key row is loaded once for both, each query keeps its four
// chains in the one-query order (the same bits), and eight independent chains keep the
// multiply-adds busy where four wait on each other; the second query is qstride bytes after
// the first, its scores ostride bytes after the first's. Four queries are the rows of four
// sequences sharing the block (beams), each qstride bytes after the one before and its scores
// ostride bytes after the one before's: each key row loaded once for the four.
func attnScores(typ string, lanes, nq int, load func(Mem, VecVirtual)) {
	isa, vec := "AVX512", ZMM
	if lanes == 8 {
		isa, vec = "AVX2", YMM
	}
	name := fmt.Sprintf("attnScores%s%s", typ, isa)
	if nq == 1 {
		TEXT(name, NOSPLIT, "func(q *float32, k *byte, hd, bs, bstride int, out *float32)")
		Doc(fmt.Sprintf("%s writes out[r] = Σ_d q[d]·k[d][r] for r < bs (keys stored transposed, %s), %d lanes at a time; hd a multiple of 4, bs of %d.", name, typ, lanes, lanes))
	} else {
		one := name
		name += fmt.Sprintf("x%d", nq)
		TEXT(name, NOSPLIT, "func(q *float32, qstride int, k *byte, hd, bs, bstride int, out *float32, ostride int)")
		Doc(fmt.Sprintf("%s writes out[r] = Σ_d q[d]·k[d][r] for r < bs for %d queries, each qstride bytes after the one before and its scores ostride bytes after the one before's (keys stored transposed, %s), %d lanes at a time, each query's scores with %s's bits; hd a multiple of 4, bs of %d.", name, nq, typ, lanes, one, lanes))
	}
	qs := stridedParams("q", "qstride", nq)
	k := Load(Param("k"), GP64())
	bs := Load(Param("bs"), GP64())
	bstride := Load(Param("bstride"), GP64())
	out := Load(Param("out"), GP64())
	var ostride Register
	if nq > 1 {
		ostride = Load(Param("ostride"), GP64())
	}
	c := make([][4]VecVirtual, nq)
	for j := range c {
		for i := range c[j] {
			c[j][i] = vec()
		}
	}
	w, qb := vec(), vec()
	p, qo, d := GP64(), GP64(), GP64()
	Label(name + "_lanes")
	TESTQ(bs, bs)
	JZ(LabelRef(name + "_done"))
	for j := range c {
		for i := range c[j] {
			if lanes == 16 {
				VPXORD(c[j][i], c[j][i], c[j][i])
			} else {
				VXORPS(c[j][i], c[j][i], c[j][i])
			}
		}
	}
	MOVQ(k, p)
	XORQ(qo, qo)
	Load(Param("hd"), d)
	Label(name + "_d")
	for i := range 4 {
		load(Mem{Base: p}, w)
		for j, qj := range qs {
			qm := Mem{Base: qj, Index: qo, Scale: 1, Disp: 4 * i}
			if lanes == 16 {
				VFMADD231PS_BCST(qm, w, c[j][i])
			} else {
				VBROADCASTSS(qm, qb)
				VFMADD231PS(qb, w, c[j][i])
			}
		}
		ADDQ(bstride, p)
	}
	ADDQ(U8(16), qo)
	SUBQ(U8(4), d)
	JNZ(LabelRef(name + "_d"))
	for j := range c {
		VADDPS(c[j][1], c[j][0], c[j][0])
		VADDPS(c[j][3], c[j][2], c[j][2])
		VADDPS(c[j][2], c[j][0], c[j][0])
	}
	VMOVUPS(c[0][0], Mem{Base: out})
	if nq > 1 {
		VMOVUPS(c[1][0], Mem{Base: out, Index: ostride, Scale: 1})
	}
	if nq == 4 {
		VMOVUPS(c[2][0], Mem{Base: out, Index: ostride, Scale: 2})
		LEAQ(Mem{Base: out, Index: ostride, Scale: 1}, p) // p is free until the next lanes
		VMOVUPS(c[3][0], Mem{Base: p, Index: ostride, Scale: 2})
	}
	ADDQ(U8(4*lanes), out)
	elem := 4
	if typ == "F16" {
		elem = 2
	}
	ADDQ(U8(lanes*elem), k)
	SUBQ(U8(lanes), bs)
	JMP(LabelRef(name + "_lanes"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// attnScoresQ8 writes the scores of a query quantized for Q8_0 keys (kernels.QuantizeQuery:
// per group of 32 elements, 32 signed bytes, the group's scale as a float32 and −128 times the
// sum of its bytes as an int32) against a block of Q8_0 keys (cache.Span.KHead of a Q8_0 cache: hd/32
// groups, each 8 rows of bs × 4 unsigned bytes, row t holding elements 4t … 4t+3 of every
// key plus 128, followed by a row of bs half-precision scales). Per group the integer sum of
// the products starts at the query's −128·Σq, which removes the keys' +128, so it is exactly
// Σ q·k; converted to float32 it is multiply-added, times the key's scale times the query's
// (rounded to float32), into each key's score, group after group. With VNNI (16 lanes)
// VPDPBUSD takes four elements of 16 keys at a time against the query's four broadcast, in
// two chains (rows t even and odd); on AVX2 (8 lanes) the bytes are widened to 16 bits and
// VPMADDWD sums pairs, the pairs of each key added by VPHADDD at the group's end. hd must be a
// multiple of 32, bs of lanes.
func attnScoresQ8(lanes int) {
	isa := "VNNI"
	if lanes == 8 {
		isa = "AVX2"
	}
	name := "attnScoresQ8_0" + isa
	TEXT(name, NOSPLIT, "func(q *byte, k *byte, hd, bs int, out *float32)")
	Doc(fmt.Sprintf("%s writes out[r] = Σ_g (s_k[g][r]·s_q[g])·Σ_{d∈g} q[d]·k[d][r] for r < bs (a query quantized by QuantizeQuery; Q8_0 keys in groups of 8 rows of 4 bytes a key, +128, and a row of scales), %d keys at a time; hd a multiple of 32, bs of %d.", name, lanes, lanes))
	q := Load(Param("q"), GP64())
	k := Load(Param("k"), GP64())
	qend := Load(Param("hd"), GP64()) // then the end of the query: 40 bytes a group
	SHRQ(U8(5), qend)
	IMUL3Q(U32(40), qend, qend)
	ADDQ(q, qend)
	bs := Load(Param("bs"), GP64())
	out := Load(Param("out"), GP64())
	rs := GP64() // bytes of a row: 4 per key
	MOVQ(bs, rs)
	SHLQ(U8(2), rs)
	gs := GP64() // bytes of a group: 8 rows and the scales
	IMUL3Q(U32(34), bs, gs)
	// co: the lane group's first byte in a row; so: its scales' offset from there in the row
	// of scales (−co/2: a key has 4 bytes in a row and 2 in the scales).
	co, so := GP64(), GP64()
	XORQ(co, co)
	XORQ(so, so)
	p, pt, qp := GP64(), GP64(), GP64()
	vec := ZMM
	if lanes == 8 {
		vec = YMM
	}
	o, f, ks := vec(), vec(), vec()
	Label(name + "_lanes")
	CMPQ(co, rs)
	JAE(LabelRef(name + "_done"))
	if lanes == 16 {
		VPXORD(o, o, o)
	} else {
		VXORPS(o, o, o)
	}
	LEAQ(Mem{Base: k, Index: co, Scale: 1}, p)
	MOVQ(q, qp)
	Label(name + "_group")
	MOVQ(p, pt)
	var sum VecVirtual
	if lanes == 16 {
		acc := [2]VecVirtual{ZMM(), ZMM()}
		VPBROADCASTD(Mem{Base: qp, Disp: 36}, acc[0])
		VPXORD(acc[1], acc[1], acc[1])
		for t := 0; t < 8; t++ {
			w, qv := ZMM(), ZMM()
			VMOVDQU64(Mem{Base: pt}, w)
			VPBROADCASTD(Mem{Base: qp, Disp: 4 * t}, qv)
			vpdpbusd(qv, w, acc[t%2])
			ADDQ(rs, pt)
		}
		VPADDD(acc[1], acc[0], acc[0])
		sum = acc[0]
	} else {
		acc := [2]VecVirtual{YMM(), YMM()} // keys 0–3 and 4–7 of the lane group, two 32-bit pairs a key
		VPXOR(acc[0], acc[0], acc[0])
		VPXOR(acc[1], acc[1], acc[1])
		for t := 0; t < 8; t++ {
			qv := YMM()
			VPMOVSXBW(Mem{Base: qp, Disp: 4 * t}, qv.AsX()) // elements 4t … 4t+3 (and four more)
			VPBROADCASTQ(qv.AsX(), qv)
			for h := range acc {
				w := YMM()
				VPMOVZXBW(Mem{Base: pt, Disp: 16 * h}, w)
				VPMADDWD(qv, w, w)
				VPADDD(w, acc[h], acc[h])
			}
			ADDQ(rs, pt)
		}
		// Each 128-bit half of VPHADDD's result: two keys of acc[0], two of acc[1]; VPERMQ puts the
		// eight in order.
		VPHADDD(acc[1], acc[0], acc[0])
		VPERMQ(U8(0xd8), acc[0], acc[0])
		b := YMM()
		VPBROADCASTD(Mem{Base: qp, Disp: 36}, b)
		VPADDD(b, acc[0], acc[0])
		sum = acc[0]
	}
	VCVTDQ2PS(sum, f)
	// pt is at the group's row of scales plus co; this lane group's scales start at pt + so.
	VCVTPH2PS(Mem{Base: pt, Index: so, Scale: 1}, ks)
	if lanes == 16 {
		VMULPS_BCST(Mem{Base: qp, Disp: 32}, ks, ks)
	} else {
		sq := YMM()
		VBROADCASTSS(Mem{Base: qp, Disp: 32}, sq)
		VMULPS(sq, ks, ks)
	}
	VFMADD231PS(ks, f, o)
	ADDQ(gs, p)
	ADDQ(U8(40), qp)
	CMPQ(qp, qend)
	JB(LabelRef(name + "_group"))
	VMOVUPS(o, Mem{Base: out})
	ADDQ(U8(4*lanes), out)
	ADDQ(U8(4*lanes), co)
	SUBQ(U8(2*lanes), so)
	JMP(LabelRef(name + "_lanes"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// attnAccumQ8 is attnAccum over Q8_0 values (cache.Span.VHead of a Q8_0 cache: rows of bytes,
// each followed by its scales), for 32·groups output elements: per row t and group, the
// weight p[t]·s (s the row's scale of the group, both as float32, the product rounded to
// float32) multiplies the group's bytes widened to float32 into each element's chain over t.
// s points at the scale of the first group in row 0; v and s advance by vstride a row.
func attnAccumQ8(lanes, groups int) {
	isa, vec := "AVX512", ZMM
	if lanes == 8 {
		isa, vec = "AVX2", YMM
	}
	name := fmt.Sprintf("attnAccumQ8_0x%d%s", groups, isa)
	TEXT(name, NOSPLIT, "func(p *float32, v, s *byte, vstride, nr int, acc *float32)")
	Doc(fmt.Sprintf("%s adds Σ_t p[t]·s[t][g]·v[t][d] to acc[d] for t < nr, d < %d (Q8_0 values, rows of vstride bytes).", name, 32*groups))
	per := 32 / lanes // vectors of a group
	p := Load(Param("p"), GP64())
	v := Load(Param("v"), GP64())
	sc := Load(Param("s"), GP64())
	vstride := Load(Param("vstride"), GP64())
	nr := Load(Param("nr"), GP64())
	accp := Load(Param("acc"), GP64())
	a := make([]VecVirtual, per*groups)
	for i := range a {
		a[i] = vec()
		VMOVUPS(Mem{Base: accp, Disp: 4 * lanes * i}, a[i])
	}
	pb, sv, x := vec(), vec(), vec()
	h := YMM() // the scale's half, broadcast (ZMM conversions read a YMM of halves)
	Label(name + "_t")
	TESTQ(nr, nr)
	JZ(LabelRef(name + "_store"))
	VBROADCASTSS(Mem{Base: p}, pb)
	for gi := 0; gi < groups; gi++ {
		if lanes == 16 {
			VPBROADCASTW(Mem{Base: sc, Disp: 2 * gi}, h)
			VCVTPH2PS(h, sv)
		} else {
			VPBROADCASTW(Mem{Base: sc, Disp: 2 * gi}, h.AsX())
			VCVTPH2PS(h.AsX(), sv)
		}
		VMULPS(sv, pb, sv)
		for j := 0; j < per; j++ {
			VPMOVSXBD(Mem{Base: v, Disp: 32*gi + lanes*j}, x)
			VCVTDQ2PS(x, x)
			VFMADD231PS(x, sv, a[gi*per+j])
		}
	}
	ADDQ(U8(4), p)
	ADDQ(vstride, v)
	ADDQ(vstride, sc)
	accumEnd(name, nr, accp, a, lanes)
}

// accumEnd ends an accumulation kernel's loop over the rows (the label name+"_t", nr rows
// left) and then stores the accumulators a, vectors of lanes floats, to accp and returns.
func accumEnd(name string, nr, accp Register, a []VecVirtual, lanes int) {
	DECQ(nr)
	JMP(LabelRef(name + "_t"))
	Label(name + "_store")
	for i := range a {
		VMOVUPS(a[i], Mem{Base: accp, Disp: 4 * lanes * i})
	}
	VZEROUPPER()
	RET()
}

// attnAccum adds a block of values weighted by the probabilities to the outputs of nq queries
// (1, 2 or 4): acc[d] += Σ_t p[t]·v[t][d] for t < nr and d < 16·width, the values row-major
// (cache.Span.VHead, rows of vstride bytes), each output element a chain over t in order, on
// vectors of lanes floats (16: AVX-512, 8: AVX2, which takes two vectors for each of
// AVX-512's). Two queries are the query heads of one key/value head: each value vector is
// loaded once for both and each output element keeps its chain (the one-query kernel's bits),
// with twice the independent chains in flight; the second query's probabilities are pstride
// bytes after the first's, its output astride bytes after the first's. Four queries are the
// rows of four sequences sharing the block (beams), each query's probabilities and output
// pstride and astride bytes after the one before's.
func attnAccum(typ string, lanes, width, nq int, load func(Mem, VecVirtual)) {
	isa, vec := "AVX512", ZMM
	if lanes == 8 {
		isa, vec = "AVX2", YMM
	}
	name := fmt.Sprintf("attnAccum%sx%d%s", typ, width, isa)
	if nq == 1 {
		TEXT(name, NOSPLIT, "func(p *float32, v *byte, vstride, nr int, acc *float32)")
		Doc(fmt.Sprintf("%s adds Σ_t p[t]·v[t][d] to acc[d] for t < nr, d < %d (%s values, row-major).", name, 16*width, typ))
	} else {
		one := name
		name += fmt.Sprintf("x%d", nq)
		TEXT(name, NOSPLIT, "func(p *float32, pstride int, v *byte, vstride, nr int, acc *float32, astride int)")
		Doc(fmt.Sprintf("%s adds Σ_t p[t]·v[t][d] to acc[d] for t < nr, d < %d (%s values, row-major) for %d queries, each one's probabilities pstride bytes after the one before's and its output astride bytes after the one before's, each with %s's bits.", name, 16*width, typ, nq, one))
	}
	nv := 16 * width / lanes // vectors of output a query
	ps := stridedParams("p", "pstride", nq)
	v := Load(Param("v"), GP64())
	vstride := Load(Param("vstride"), GP64())
	nr := Load(Param("nr"), GP64())
	accs := stridedParams("acc", "astride", nq)
	a := make([][]VecVirtual, nq)
	for j, accp := range accs {
		a[j] = make([]VecVirtual, nv)
		for i := range a[j] {
			a[j][i] = vec()
			VMOVUPS(Mem{Base: accp, Disp: 4 * lanes * i}, a[j][i])
		}
	}
	pb := make([]VecVirtual, nq)
	for j := range pb {
		pb[j] = vec()
	}
	var x VecVirtual
	if typ != "F32" || nq > 1 {
		x = vec()
	}
	elem := 4
	if typ == "F16" {
		elem = 2
	}
	Label(name + "_t")
	TESTQ(nr, nr)
	JZ(LabelRef(name + "_store"))
	for j, pj := range ps {
		VBROADCASTSS(Mem{Base: pj}, pb[j])
	}
	for i := range nv {
		m := Mem{Base: v, Disp: lanes * elem * i}
		if typ == "F32" && nq == 1 {
			VFMADD231PS(m, pb[0], a[0][i])
			continue
		}
		load(m, x)
		for j := range a {
			VFMADD231PS(x, pb[j], a[j][i])
		}
	}
	for _, pj := range ps {
		ADDQ(U8(4), pj)
	}
	ADDQ(vstride, v)
	DECQ(nr)
	JMP(LabelRef(name + "_t"))
	Label(name + "_store")
	for j, accp := range accs {
		for i := range a[j] {
			VMOVUPS(a[j][i], Mem{Base: accp, Disp: 4 * lanes * i})
		}
	}
	VZEROUPPER()
	RET()
}

// prefetch issues PREFETCHT0 (PREFETCHT1 for the L2 variant) for every 64-byte line of n bytes
// at p.
func prefetch(name string, l2 bool) {
	TEXT(name, NOSPLIT, "func(p *byte, n int)")
	level := "the cache"
	if l2 {
		level = "the L2 cache"
	}
	Doc(fmt.Sprintf("%s asks %s for every 64-byte line of the n bytes at p.", name, level))
	p := Load(Param("p"), GP64())
	n := Load(Param("n"), GP64())
	Label(name + "_loop")
	CMPQ(n, U8(0))
	JLE(LabelRef(name + "_done"))
	if l2 {
		PREFETCHT1(Mem{Base: p})
	} else {
		PREFETCHT0(Mem{Base: p})
	}
	ADDQ(U8(64), p)
	SUBQ(U8(64), n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	RET()
}
