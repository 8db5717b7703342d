package llama

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomlm/loom/internal/fastmath"
)

// TestSwiGLU checks swiGLU against its definition, g / (1 + e**(-g)) · u with fastmath's
// exponential, bit for bit, over lengths around its 4 096-value chunks and the vector
// kernels' 32-value blocks, with infinities and NaN among the gates.
func TestSwiGLU(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 31, 32, 33, 2048, 4095, 4096, 4097, 3*4096 + 17} {
		gate, up := make([]float32, n), make([]float32, n)
		for i := range gate {
			gate[i] = float32(r.NormFloat64() * 4)
			up[i] = float32(r.NormFloat64())
		}
		gate[0] = float32(math.Inf(-1))
		if n > 2 {
			gate[1], gate[2] = float32(math.Inf(1)), float32(math.NaN())
		}
		want := make([]float32, n)
		for i, g := range gate {
			want[i] = g / (1 + fastmath.Exp(-g)) * up[i]
		}
		swiGLU(gate, up, make([]float32, 4096))
		for i := range gate {
			if math.Float32bits(gate[i]) != math.Float32bits(want[i]) && !(gate[i] != gate[i] && want[i] != want[i]) {
				t.Fatalf("n=%d: element %d: %v, want %v", n, i, gate[i], want[i])
			}
		}
	}
}

// BenchmarkSwiGLU is the FFN activation of a 72-token prompt's rows on a 2 048-wide FFN (one
// layer of rand110M).
func BenchmarkSwiGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	gate, up, saved := make([]float32, 72*2048), make([]float32, 72*2048), make([]float32, 72*2048)
	for i := range saved {
		saved[i], up[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64())
	}
	tmp := make([]float32, 4096)
	b.SetBytes(int64(len(gate)) * 4)
	for b.Loop() {
		copy(gate, saved)
		swiGLU(gate, up, tmp)
	}
}

// TestAttnSplit checks how attention shares out its work: a task per sequence from two
// sequences a worker, else a task per head, and rows split only when the heads alone are too
// few.
func TestAttnSplit(t *testing.T) {
	for _, tc := range []struct {
		segs, kvHeads, workers int
		heads, split           int
	}{
		{16, 12, 2, 12, 1}, // a 16-stream decoding step: a task per sequence
		{4, 12, 2, 12, 1},
		{3, 12, 2, 1, 1},
		{1, 12, 2, 1, 1},   // one sequence: a task per head
		{1, 1, 2, 1, 4},    // one head: its rows split in four
		{2, 2, 2, 1, 1},    // four tasks already
		{64, 8, 2, 8, 1},   // never more than the model's heads
		{16, 12, 16, 1, 1}, // many workers: a task per head
		{2, 4, 1, 4, 1},
	} {
		heads, split := attnSplit(tc.segs, tc.kvHeads, tc.workers)
		if heads != tc.heads || split != tc.split {
			t.Errorf("attnSplit(%d segments, %d heads, %d workers) = %d heads a task, split %d; want %d, %d", tc.segs, tc.kvHeads, tc.workers, heads, split, tc.heads, tc.split)
		}
	}
}

// TestRMSNormRowsMatchesRowByRow checks rmsNormRows against rmsNorm on each row, bit for bit,
// in place and not, for row counts around its groups of four.
func TestRMSNormRowsMatchesRowByRow(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, width := range []int{1, 64, 256, 257} {
		w := make([]float32, width)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		for n := range 10 {
			x := make([]float32, n*width)
			for i := range x {
				x[i] = float32(r.NormFloat64() * math.Exp(r.NormFloat64()*4))
			}
			want := make([]float32, len(x))
			for row := range n {
				rmsNorm(want[row*width:(row+1)*width], x[row*width:(row+1)*width], w, 1e-5)
			}
			got := make([]float32, len(x))
			rmsNormRows(got, x, w, width, 1e-5)
			inPlace := slices.Clone(x)
			rmsNormRows(inPlace, inPlace, w, width, 1e-5)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(inPlace[i]) != math.Float32bits(want[i]) {
					t.Fatalf("width %d, %d rows: value %d: %v (in place %v), want %v", width, n, i, got[i], inPlace[i], want[i])
				}
			}
		}
	}
}

// BenchmarkRMSNormRows normalises four rows of 256 values (a four-beam step of the embedded
// model), row by row and with rmsNormRows.
func BenchmarkRMSNormRows(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	const width, n = 256, 4
	x, w, dst := make([]float32, n*width), make([]float32, width), make([]float32, n*width)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	b.Run("rowByRow", func(b *testing.B) {
		for b.Loop() {
			for row := range n {
				rmsNorm(dst[row*width:(row+1)*width], x[row*width:(row+1)*width], w, 1e-5)
			}
		}
	})
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			rmsNormRows(dst, x, w, width, 1e-5)
		}
	})
}

// TestQueryRuns checks the kernel calls attendGroup makes for a set of rows holding a block.
func TestQueryRuns(t *testing.T) {
	for _, tc := range []struct {
		rs            []int
		perRow, group int
		want          []queryRun
	}{
		// Four beams, two query heads a row of one key/value head: each head for all four.
		{[]int{0, 1, 2, 3}, 2, 2, []queryRun{{0, 2, 4, 0}, {1, 2, 4, 1}}},
		// Rows 1 and 3, then rows 0, 2 and 3: pairs two rows apart, and the last alone.
		{[]int{1, 3}, 2, 2, []queryRun{{2, 4, 2, 0}, {3, 4, 2, 1}}},
		{[]int{0, 2, 3}, 1, 1, []queryRun{{0, 2, 2, 0}, {3, 1, 1, 0}}},
		// A row alone: the heads of each key/value head together.
		{[]int{2}, 2, 2, []queryRun{{4, 1, 2, 0}}},
		{[]int{1}, 8, 4, []queryRun{{8, 1, 4, 0}, {12, 1, 4, 4}}},
		{[]int{0}, 4, 1, []queryRun{{0, 1, 1, 0}, {1, 1, 1, 1}, {2, 1, 1, 2}, {3, 1, 1, 3}}},
		{[]int{0}, 3, 3, []queryRun{{0, 1, 2, 0}, {2, 1, 1, 2}}},
		{[]int{3}, 4, 2, []queryRun{{12, 1, 2, 0}, {14, 1, 2, 2}}},
	} {
		if got := queryRuns(nil, tc.rs, tc.perRow, tc.group); !slices.Equal(got, tc.want) {
			t.Errorf("queryRuns(%v, %d heads a row, %d a key/value head) = %v, want %v", tc.rs, tc.perRow, tc.group, got, tc.want)
		}
	}
}
