package kernels

import (
	"fmt"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/loomlm/loom/model/ggml"
)

// kind indexes the per-type kernel tables.
type kind int

const (
	kF32 kind = iota
	kF16
	kBF16
	kQ8_0
	kQ4_0
	kQ4_K
	kQ6_K
	kQ4_1
	kQ5_0
	kQ5_1
	kIQ4_NL
	kQ2_K
	kQ3_K
	kQ5_K
	kIQ4_XS
	numKinds
)

// actKind is how activations are presented to a type's kernel.
type actKind int

const (
	actFloat actKind = iota // raw float32, blocks of 8
	act32                   // quantize32, groups of four blocks of 32
	actK                    // quantizeK, blocks of 256
	act32s                  // act32 with each block's sum s (Q4_1 and Q5_1, llama.cpp's Q8_1)
	numActKinds
)

type typeKernel struct {
	kind       kind
	act        actKind
	blockElems int // elements per kernel block
	wBlock     int // weight bytes per kernel block
	typeBlock  int // elements per block of the storage type
	ok         bool

	// Derived by newTypeKernel, so that the per-call arithmetic of a small product (an attention
	// block's, say) has no divisions: blockElems and typeBlock are powers of two.
	blockShift, typeShift uint // log2 of blockElems and of typeBlock
	blockBytes            int  // bytes of one block of the storage type
}

func newTypeKernel(k kind, act actKind, blockElems, wBlock, typeBlock int) typeKernel {
	if blockElems&(blockElems-1) != 0 || typeBlock&(typeBlock-1) != 0 {
		panic(fmt.Sprintf("kernels: block sizes %d and %d must be powers of two", blockElems, typeBlock))
	}
	return typeKernel{kind: k, act: act, blockElems: blockElems, wBlock: wBlock, typeBlock: typeBlock, ok: true,
		blockShift: uint(bits.TrailingZeros(uint(blockElems))),
		typeShift:  uint(bits.TrailingZeros(uint(typeBlock))),
		blockBytes: wBlock * typeBlock / blockElems}
}

// rowBytes returns the bytes of a row of cols elements, 0 unless cols is a positive whole
// number of storage blocks.
func (tk *typeKernel) rowBytes(cols int) int {
	if cols <= 0 || cols&(tk.typeBlock-1) != 0 {
		return 0
	}
	return cols >> tk.typeShift * tk.blockBytes
}

// typeKernels is indexed by ggml.Type (an array, not a map: it is read on every call).
var typeKernels = [ggml.BF16 + 1]typeKernel{
	ggml.F32:  newTypeKernel(kF32, actFloat, 8, 32, 1),
	ggml.F16:  newTypeKernel(kF16, actFloat, 8, 16, 1),
	ggml.BF16: newTypeKernel(kBF16, actFloat, 8, 16, 1),
	ggml.Q8_0: newTypeKernel(kQ8_0, act32, 128, 4*34, 32),
	ggml.Q4_0: newTypeKernel(kQ4_0, act32, 128, 4*18, 32),
	ggml.Q4_K: newTypeKernel(kQ4_K, actK, 256, 144, 256),
	ggml.Q6_K: newTypeKernel(kQ6_K, actK, 256, 210, 256),
	// Their pure-Go kernels are in generic_more.go.
	ggml.Q4_1:   newTypeKernel(kQ4_1, act32s, 128, 4*20, 32),
	ggml.Q5_0:   newTypeKernel(kQ5_0, act32, 128, 4*22, 32),
	ggml.Q5_1:   newTypeKernel(kQ5_1, act32s, 128, 4*24, 32),
	ggml.IQ4_NL: newTypeKernel(kIQ4_NL, act32, 128, 4*18, 32),
	ggml.Q2_K:   newTypeKernel(kQ2_K, actK, 256, 84, 256),
	ggml.Q3_K:   newTypeKernel(kQ3_K, actK, 256, 110, 256),
	ggml.Q5_K:   newTypeKernel(kQ5_K, actK, 256, 176, 256),
	ggml.IQ4_XS: newTypeKernel(kIQ4_XS, actK, 256, 136, 256),
}

// kernelOf returns the kernel description of t, nil if t is not supported.
func kernelOf(t ggml.Type) *typeKernel {
	if int(t) >= len(typeKernels) || !typeKernels[t].ok {
		return nil
	}
	return &typeKernels[t]
}

// impl is one implementation of all kernels.
type impl struct {
	name string
	dot  [numKinds][4]dotFunc // dot[k][nx-1]
	// rows16[k], where not nil, is dot[k][0] for 16 weight rows at a time (rows a multiple of
	// 16), with the same bits: the rows' final horizontal sums are done together.
	rows16 [numKinds]dotFunc
	// rows4[k], where not nil, is dot[k][3] for four weight rows at a time (rows a multiple of
	// 4), with the same bits: the 16 results' horizontal sums are done together.
	rows4 [numKinds]dotFunc
	// pairs4[k], where not nil, is dot[k][3] for two weight rows at a time (rows even), with
	// the same bits: each activation block is loaded once for both rows.
	pairs4 [numKinds]dotFunc
	// pairs4Cached[k] is pairs4[k] without software prefetch, for weights a product has just
	// read (see product.rows).
	pairs4Cached [numKinds]dotFunc
	// packed[k][nx-1], where not nil, computes nx activation rows against matrices of kind k
	// packed by Pack; Pack packs only for an implementation that has them.
	packed [numKinds][4]packedFunc
	// packedPairs[k], where not nil, is packed[k][3] over pairs of groups of 16 rows (the
	// same results; groups counts pairs).
	packedPairs [numKinds]packedFunc
	attn        attnKernels
	axpy        func(a float32, x, y *float32, n int)
	// quant32 and quantK quantise one activation row (act.go).
	quant32, quantK func(dst []byte, x []float32)
	// quantQ8 quantises a row to Q8_0 blocks (QuantizeQ8_0).
	quantQ8 func(q []byte, d []uint16, x []float32)
}

// asmImpl is the best assembly implementation for the CPU, nil where the CPU or build lacks
// one.
var asmImpl *impl

// impls lists every implementation the CPU runs, generic first (the tests compare them).
var impls = []*impl{&genericImpl}

var forceGeneric atomic.Bool

// forceImpl, when set, overrides the choice (tests).
var forceImpl atomic.Pointer[impl]

func init() {
	if os.Getenv("LOOM_KERNELS") == "generic" {
		forceGeneric.Store(true)
	}
}

func currentImpl() *impl {
	if im := forceImpl.Load(); im != nil {
		return im
	}
	if asmImpl == nil || forceGeneric.Load() {
		return &genericImpl
	}
	return asmImpl
}

// SetGeneric forces the pure-Go kernels (true) or lets the assembly kernels run where the CPU
// supports them (false), and returns the previous setting. The environment variable
// LOOM_KERNELS=generic sets it at start-up. It is meant for tests and comparisons; it is safe
// to call concurrently with running kernels.
func SetGeneric(on bool) (previous bool) {
	return forceGeneric.Swap(on)
}

// Implementation names the kernels in use: "avx512", "avx2" or "generic".
func Implementation() string {
	return currentImpl().name
}

// actBuf is a scratch buffer for quantised activations.
type actBuf struct{ b []byte }

var actPool = sync.Pool{New: func() any { return new(actBuf) }}

// stepBytes is the weight bytes every group of activation rows passes over before the next
// weight rows: small enough to stay in L2, large enough that each kernel call does enough work
// (16 KiB, an L1's worth, ran batched float products 20–30% slower).
const stepBytes = 128 << 10

// acts is a batch of activation rows in the form a type's kernels read.
type acts struct {
	x       []float32 // the rows as given (float tails)
	b       []byte    // the rows in the kernels' form
	stride  int       // bytes from one row to the next in b
	scratch *actBuf   // pooled storage of b, if any
}

// prepare presents the n rows of x (cols each) in the form kind's kernels read.
func prepare(im *impl, kind actKind, x []float32, n, cols int) acts {
	a := acts{x: x}
	if kind == actFloat {
		a.b = unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
		a.stride = 4 * cols
		return a
	}
	q := im.quant32
	a.stride = act32Bytes(cols)
	if kind == actK {
		q, a.stride = im.quantK, cols/256*actKBytes
	}
	a.scratch = actPool.Get().(*actBuf)
	if cap(a.scratch.b) < n*a.stride {
		a.scratch.b = make([]byte, n*a.stride)
	}
	a.b = a.scratch.b[:n*a.stride]
	if n*cols >= parallelQuantValues { // the closure escapes: made only here
		parallelFor(n, max(1, parallelQuantValues/2/cols), func(lo, hi int) { quantizeRows(q, kind, a.b, a.stride, x, cols, lo, hi) })
	} else {
		quantizeRows(q, kind, a.b, a.stride, x, cols, 0, n)
	}
	return a
}

// quantizeRows quantizes activation rows [lo, hi) of x (rows of cols values) with q into b
// (rows of stride bytes), as prepare lays them out for kind.
func quantizeRows(q func(dst []byte, x []float32), kind actKind, b []byte, stride int, x []float32, cols, lo, hi int) {
	for i := lo; i < hi; i++ {
		row := b[i*stride : (i+1)*stride]
		if kind != actK && cols%128 != 0 {
			clear(row[len(row)-act32Group:]) // the unused blocks of the last group
		}
		q(row, x[i*cols:(i+1)*cols])
		if kind == act32s {
			blockSums(row, x[i*cols:(i+1)*cols])
		}
	}
}

// parallelQuantValues is the fewest activation values prepare quantizes on the pool's
// workers rather than on the caller alone.
const parallelQuantValues = 8 << 10

func (a acts) release() {
	if a.scratch != nil {
		actPool.Put(a.scratch)
	}
}

// product is one matrix of a MatMul or MatMuls call with its output.
type product struct {
	out    []float32
	m      Matrix
	tk     typeKernel
	kern   *[4]dotFunc
	rows16 dotFunc // nil, or the kind's 16-row kernel (used for one activation row)
	rows4  dotFunc // nil, or the kind's kernel of four activation rows and four weight rows
	pairs4 dotFunc // nil, or the kind's kernel of four activation rows and two weight rows
	// pairs4Cached is pairs4 without prefetch, nil where the implementation has none.
	pairs4Cached dotFunc
	// packed is the kind's kernels over packed rows (the generic ones where the
	// implementation has none), used when m is packed.
	packed *[4]packedFunc
	// pairs is packed[3] over pairs of groups, nil where the implementation has none.
	pairs packedFunc
	a     acts
	rb    int
}

// newProduct returns the product of m with the activations a into out on im's kernels.
func newProduct(im *impl, out []float32, m Matrix, a acts) product {
	tk := *kernelOf(m.Type)
	p := product{out: out, m: m, tk: tk, kern: &im.dot[tk.kind], rows16: im.rows16[tk.kind], rows4: im.rows4[tk.kind], pairs4: im.pairs4[tk.kind], pairs4Cached: im.pairs4Cached[tk.kind], a: a, rb: m.RowBytes()}
	if m.packed != nil {
		p.packed = &im.packed[tk.kind]
		p.pairs = im.packedPairs[tk.kind]
		if p.packed[0] == nil {
			p.packed, p.pairs = &genericPackedImpl[tk.kind], nil
		}
	}
	return p
}

// rows16MaxCols is the longest row a product of one activation row hands to the 16-row
// kernel: on short rows the horizontal sums that end each row cost as much as the products,
// and sharing them pays; on long rows streamed from memory the one-row kernel reads faster
// (best of six alternating runs of a rand110M token's products: F32 46 against 43 GB/s, F16 46
// against 37).
const rows16MaxCols = 256

// rows4MaxCols is the longest row that a product of four activation rows hands to the kernel
// of four weight rows at a time (weight rows in pairs, each activation block loaded once for
// two of them). `go test ./model/kernels -run '^$' -bench 'MatMul/(F32|F16)/.*/n=4$'`, three
// rounds alternating, 2026-11-29: F32 768-wide rows took 10–18 % less time than with the
// one-weight-row kernel, the 32 000 × 768 output matrix streamed from memory included, and
// 2 048-wide ones 5–28 % more (two weight rows and the four activation rows, 48 KB, no longer
// fit in L1 together). Half-precision rows longer than rows4HalfAnyCols take it only in
// matrices of at most rows4MaxBytes.
const rows4MaxCols = 1024

// rows4HalfAnyCols is the longest half-precision (F16, BF16) row that a product of four
// activation rows hands to the kernel of four weight rows in a matrix of any size: 256-wide
// rows took 6–18 % less time with it (the benchmark of rows4MaxCols).
const rows4HalfAnyCols = 256

// rows4MaxBytes is the largest matrix of a half-precision type whose rows of more than
// rows4HalfAnyCols values a product of four activation rows hands to the kernel of four weight
// rows at a time. `go test ./model/kernels -run '^$' -bench 'MatMul/F16/.*/n=4$'`, three rounds
// alternating, 2026-11-29: the embedded model's FFN down (256×704) 8.6–12.4 → 6.7–8.1 µs,
// 768×768 20–32 → 17–20 µs, a rand110M token's products (`-bench 'Forward/(F16|BF16)/n=4$'`,
// streamed from memory) level; the 32 000×768 output matrix alone 3–14 % slower, hence the
// bound. BF16's products alone were not measured: BF16 takes F16's bound (its kernel has the
// same loads and products, a shift where F16 converts).
const rows4MaxBytes = 4 << 20

// rows4ManyMaxCols is the longest row that products of more than four activation rows hand
// to the kernel of four weight rows at a time, one group of four after another. `go test
// ./model/kernels -run '^$' -bench 'MatMul/(F16|F32)/(4096x256|704x256)/n=(8|32)$'`, three
// rounds alternating, 2026-11-29: F16 4 096×256 n=32 252–257 → 232–243 µs, 704×256 n=8
// 14.5–14.9 → 11.9–12.9, F32 4 096×256 n=32 254–281 → 221–231, n=8 68–74 → 55–62; F32 rows of
// 768 were level or slower (the 32 000×768 output matrix n=32 5.2–5.8 → 5.6 ms).
const rows4ManyMaxCols = 256

// rows computes rows [r0, r1) of the product for all n activation rows.
func (p *product) rows(n, r0, r1 int) {
	if p.packed != nil {
		p.packedRows(n, r0, r1, p.packed)
		return
	}
	m, a, rb := p.m, &p.a, p.rb
	nBlocks := m.Cols >> p.tk.blockShift
	tail := m.Cols & (p.tk.blockElems - 1) // float columns, or 32-element blocks past the last group
	if nBlocks == 0 {                      // only a tail, which adds to out
		for i := 0; i < n; i++ {
			clear(p.out[i*m.Rows+r0 : i*m.Rows+r1])
		}
	} else {
		// Rows in groups small enough to stay in cache while every activation group passes
		// over them.
		step := r1 - r0
		if n > 4 {
			step = max(1, stepBytes/rb)
		}
		use16 := p.rows16 != nil && n == 1 && m.Cols <= rows16MaxCols
		for lo := r0; lo < r1; lo += step {
			hi := min(lo+step, r1)
			from := lo // the first row left to the multi-row kernels
			if use16 {
				if full := (hi - lo) &^ 15; full > 0 {
					for i := 0; i < n; i++ {
						p.rows16(&m.Data[lo*rb], rb, full, nBlocks, &a.b[i*a.stride], a.stride, &p.out[i*m.Rows+lo], m.Rows)
					}
					from += full
				}
			}
			if from == hi {
				continue
			}
			for g := 0; g < n; g += 4 {
				nx := min(4, n-g)
				r := from
				// Four weight rows at a time on short rows: for a single group of four (beams,
				// a small batch), and for every group of a larger batch on rows of at most
				// 256 (the embedded model's: 10–20 % less time than two weight rows at a
				// time, where on 768-wide F32 rows the kernel of pairs without prefetch for
				// the later groups was level or better).
				short := nx == 4 && p.rows4 != nil && m.Cols <= rows4MaxCols && (n == 4 || m.Cols <= rows4ManyMaxCols) &&
					(p.tk.kind == kF32 || m.Cols <= rows4HalfAnyCols || m.Rows*rb <= rows4MaxBytes)
				// Two weight rows at a time pay where several groups of activation rows pass
				// over the same weights (from cache after the first); a single group streaming
				// its weights from memory reads them faster one row at a time (four beams of a
				// 110M F32 model: 0.58–0.75× greedy's speed against 0.49–0.64×).
				if nx == 4 && n > 4 && p.pairs4 != nil && !short {
					if even := (hi - r) &^ 1; even > 0 {
						// The first group's pass brought the step's weights into cache; the
						// later groups' prefetches would only take load slots (F32 prompt
						// processing of a 110M model: 0.99–1.15×, median 1.07×, over 12
						// alternating rounds).
						k := p.pairs4
						if g > 0 && p.pairs4Cached != nil {
							k = p.pairs4Cached
						}
						k(&m.Data[r*rb], rb, even, nBlocks, &a.b[g*a.stride], a.stride, &p.out[g*m.Rows+r], m.Rows)
						r += even
					}
				}
				if short {
					if full := (hi - r) &^ 3; full > 0 {
						p.rows4(&m.Data[r*rb], rb, full, nBlocks, &a.b[g*a.stride], a.stride, &p.out[g*m.Rows+r], m.Rows)
						r += full
					}
				}
				if r < hi {
					p.kern[nx-1](&m.Data[r*rb], rb, hi-r, nBlocks, &a.b[g*a.stride], a.stride, &p.out[g*m.Rows+r], m.Rows)
				}
			}
		}
	}
	switch {
	case tail == 0:
	case p.tk.act == act32 || p.tk.act == act32s:
		blocksTail(p.out, m, a.b, a.stride, n, r0, r1, p.tk)
	default:
		floatTail(p.out, m, a.x, n, r0, r1, tail)
	}
}

func matMul(outs [][]float32, ms []Matrix, x []float32, n int, im *impl) {
	var prepared [numActKinds]*acts
	ps := make([]product, len(ms))
	total, work := 0, 0
	for k, m := range ms {
		tk := *kernelOf(m.Type)
		if prepared[tk.act] == nil {
			a := prepare(im, tk.act, x, n, m.Cols)
			prepared[tk.act] = &a
		}
		ps[k] = newProduct(im, outs[k], m, *prepared[tk.act])
		total += m.Rows
		work += m.Rows * ps[k].rb
	}
	// The products' rows form one index space [0, total) shared out to the workers.
	run := func(lo, hi int) {
		start := 0
		for k := range ps {
			end := start + ps[k].m.Rows
			if lo < end && hi > start {
				ps[k].rows(n, max(lo, start)-start, min(hi, end)-start)
			}
			start = end
		}
	}
	if !parallelWorth(work, n) || total == 0 {
		run(0, total)
	} else {
		parallelFor(total, rowGrain(max(1, work/total)), run)
	}
	for _, a := range prepared {
		if a != nil {
			a.release()
		}
	}
}

// parallelWorth reports whether a product streaming work weight bytes against n activation
// rows is worth sharing out to the workers.
func parallelWorth(work, n int) bool { return work*(1+n/4) >= 2*minChunkBytes }

// minChunkBytes is the least weight data a parallel claim gets.
const minChunkBytes = 32 << 10

// rowGrain picks the fewest rows of a parallel claim of rows of rowBytes: at least
// minChunkBytes, a multiple of 16 rows so that claims do not share cache lines of out.
func rowGrain(rowBytes int) int {
	return max(16, (minChunkBytes/rowBytes+15)&^15)
}

// blocksTail adds the blocks of a 32-element type past the last whole group of four.
func blocksTail(out []float32, m Matrix, xb []byte, xstride, n, r0, r1 int, tk typeKernel) {
	rb := m.RowBytes()
	nb := m.Cols / 32
	dot := blocks32[tk.kind]
	for r := r0; r < r1; r++ {
		row := m.Data[r*rb : (r+1)*rb]
		for i := 0; i < n; i++ {
			out[i*m.Rows+r] += dot(row, xb[i*xstride:(i+1)*xstride], nb&^3, nb)
		}
	}
}

// floatTail adds the columns past the last whole block of 8 (float types only).
func floatTail(out []float32, m Matrix, x []float32, n, r0, r1, tail int) {
	rb := m.RowBytes()
	c0 := m.Cols - tail
	for r := r0; r < r1; r++ {
		row := m.Data[r*rb : (r+1)*rb]
		for i := 0; i < n; i++ {
			var s float32
			for c := c0; c < m.Cols; c++ {
				var w float32
				switch m.Type {
				case ggml.F32:
					w = lef32(row[4*c:])
				case ggml.F16:
					w = ggml.HalfToFloat32(le16(row[2*c:]))
				case ggml.BF16:
					w = ggml.BF16ToFloat32(le16(row[2*c:]))
				}
				s += w * x[i*m.Cols+c]
			}
			out[i*m.Rows+r] += s
		}
	}
}

// Dot returns Σ a[i]·b[i]. It panics if the lengths differ.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic("kernels: Dot of slices of different lengths")
	}
	n8 := len(a) &^ 7
	var s float32
	if n8 > 0 {
		currentImpl().dot[kF32][0]((*byte)(unsafe.Pointer(&a[0])), 0, 1, n8/8, (*byte)(unsafe.Pointer(&b[0])), 0, &s, 0)
	}
	for i := n8; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}

// Axpy adds alpha·x to y: y[i] += alpha·x[i]. It panics if the lengths differ.
func Axpy(alpha float32, x, y []float32) {
	if len(x) != len(y) {
		panic("kernels: Axpy of slices of different lengths")
	}
	n8 := len(x) &^ 7
	if n8 > 0 {
		currentImpl().axpy(alpha, &x[0], &y[0], n8)
	}
	for i := n8; i < len(x); i++ {
		y[i] += alpha * x[i]
	}
}
