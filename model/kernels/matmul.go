package kernels

import (
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
	numKinds
)

// actKind is how activations are presented to a type's kernel.
type actKind int

const (
	actFloat actKind = iota // raw float32, blocks of 8
	act32                   // quantize32, groups of four blocks of 32
	actK                    // quantizeK, blocks of 256
)

type typeKernel struct {
	kind       kind
	act        actKind
	blockElems int // elements per kernel block
	wBlock     int // weight bytes per kernel block
	typeBlock  int // elements per block of the storage type
}

var typeKernels = map[ggml.Type]typeKernel{
	ggml.F32:  {kF32, actFloat, 8, 32, 1},
	ggml.F16:  {kF16, actFloat, 8, 16, 1},
	ggml.BF16: {kBF16, actFloat, 8, 16, 1},
	ggml.Q8_0: {kQ8_0, act32, 128, 4 * 34, 32},
	ggml.Q4_0: {kQ4_0, act32, 128, 4 * 18, 32},
	ggml.Q4_K: {kQ4_K, actK, 256, 144, 256},
	ggml.Q6_K: {kQ6_K, actK, 256, 210, 256},
}

// impl is one implementation of all kernels.
type impl struct {
	name string
	dot  [numKinds][4]dotFunc // dot[k][nx-1]
	axpy func(a float32, x, y *float32, n int)
	// quant32 and quantK quantise one activation row (act.go).
	quant32, quantK func(dst []byte, x []float32)
}

// asmImpl is the assembly implementation, nil where the CPU or build lacks it.
var asmImpl *impl

var forceGeneric atomic.Bool

func init() {
	if os.Getenv("LOOM_KERNELS") == "generic" {
		forceGeneric.Store(true)
	}
}

func currentImpl() *impl {
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

// Implementation names the kernels in use: "avx2" or "generic".
func Implementation() string {
	return currentImpl().name
}

// actBuf is a scratch buffer for quantised activations.
type actBuf struct{ b []byte }

var actPool = sync.Pool{New: func() any { return new(actBuf) }}

// l1Bytes is the weight bytes a group of activation rows reuses from cache before moving on.
const l1Bytes = 16 << 10

func matMul(out []float32, m Matrix, x []float32, n int, im *impl) {
	tk := typeKernels[m.Type]
	rb := m.RowBytes()
	nBlocks := m.Cols / tk.blockElems
	tail := m.Cols % tk.blockElems // float columns, or Q8_0/Q4_0 blocks past the last group

	var xb []byte
	var xstride int
	var buf *actBuf
	switch tk.act {
	case actFloat:
		xb = unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
		xstride = 4 * m.Cols
	case act32, actK:
		q := im.quant32
		if m.Cols%128 != 0 {
			q = func(dst []byte, x []float32) {
				clear(dst[len(dst)-act32Group:])
				im.quant32(dst, x)
			}
		}
		xstride = act32Bytes(m.Cols)
		if tk.act == actK {
			q, xstride = im.quantK, nBlocks*actKBytes
		}
		buf = actPool.Get().(*actBuf)
		if cap(buf.b) < n*xstride {
			buf.b = make([]byte, n*xstride)
		}
		xb = buf.b[:n*xstride]
		for i := 0; i < n; i++ {
			q(xb[i*xstride:(i+1)*xstride], x[i*m.Cols:(i+1)*m.Cols])
		}
	}
	kern := &im.dot[tk.kind]

	run := func(r0, r1 int) {
		if nBlocks == 0 { // only a tail, which adds to out
			for i := 0; i < n; i++ {
				clear(out[i*m.Rows+r0 : i*m.Rows+r1])
			}
		} else {
			// Rows in groups small enough to stay in cache while every activation group
			// passes over them.
			step := r1 - r0
			if n > 4 {
				step = max(1, l1Bytes/rb)
			}
			for lo := r0; lo < r1; lo += step {
				hi := min(lo+step, r1)
				for g := 0; g < n; g += 4 {
					nx := min(4, n-g)
					kern[nx-1](&m.Data[lo*rb], rb, hi-lo, nBlocks, &xb[g*xstride], xstride, &out[g*m.Rows+lo], m.Rows)
				}
			}
		}
		switch {
		case tail == 0:
		case tk.act == act32:
			blocksTail(out, m, xb, xstride, n, r0, r1, tk)
		default:
			floatTail(out, m, x, n, r0, r1, tail)
		}
	}

	work := m.Rows * rb * (1 + n/4)
	if work < 2*minChunkBytes {
		run(0, m.Rows)
	} else {
		parallelFor(m.Rows, rowChunk(m.Rows, rb), run)
	}
	if buf != nil {
		actPool.Put(buf)
	}
}

// minChunkBytes is the least weight data a parallel chunk gets.
const minChunkBytes = 32 << 10

// rowChunk picks the rows per parallel chunk: enough chunks to balance the load over the
// workers, each at least minChunkBytes, a multiple of 16 rows so that chunks do not share
// cache lines of out.
func rowChunk(rows, rowBytes int) int {
	c := rows / (4 * workers())
	c = max(c, minChunkBytes/rowBytes)
	c = (c + 15) &^ 15
	return max(c, 16)
}

// blocksTail adds the Q8_0/Q4_0 blocks past the last whole group of four.
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
					w = halfToFloat(le16(row[2*c:]))
				case ggml.BF16:
					w = bf16ToFloat(le16(row[2*c:]))
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
