package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/loomlm/loom/model/ggml"
)

// Shapes of the rand110M model of shared/baselines.md (rows×cols): attention projections,
// FFN gate/up, FFN down, output.
var benchShapes = []struct{ rows, cols int }{{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}, {4096, 256}, {704, 256}, {256, 704}}

// BenchmarkMatMul reports the weights streamed per second (MB/s is weight bytes, once per
// call, whatever the batch), comparable with tokens/s × model size for generation.
func BenchmarkMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, typ := range testTypes {
		for _, sh := range benchShapes {
			if _, err := typ.RowBytes(sh.cols); err != nil {
				continue // the type's blocks do not divide the row (Q4_K's 256 values, rows of 704)
			}
			m := randomMatrix(r, typ, sh.rows, sh.cols)
			for _, n := range []int{1, 4, 8, 32} {
				x := randomActivations(r, n, sh.cols)
				out := make([]float32, n*sh.rows)
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(b *testing.B) {
					b.SetBytes(int64(len(m.Data)))
					for b.Loop() {
						MatMul(out, m, x, n)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
				})
			}
		}
	}
}

// BenchmarkForward runs the weight products of one rand110M token (12 layers of Q, K, V, O,
// gate, up, down and the output matrix; 110 M weights, larger than any cache) with 1, 4, 8 and
// 128 activation rows: a ceiling on generation (n=1), on four beams' steps (n=4), batched
// speed (n=8) and prompt processing (n=128: every row through every product, as a ceiling)
// from the kernels alone.
func BenchmarkForward(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, typ := range testTypes {
		ms := rand110MToken(r, typ)
		var bytes int64
		for _, m := range ms {
			bytes += int64(len(m.Data))
		}
		for _, n := range []int{1, 4, 8, 128} {
			x := randomActivations(r, n, 2048)
			out := make([]float32, n*32000)
			b.Run(fmt.Sprintf("%v/n=%d", typ, n), func(b *testing.B) {
				b.SetBytes(bytes)
				for b.Loop() {
					for _, m := range ms {
						MatMul(out[:n*m.Rows], m, x[:n*m.Cols], n)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}

// rand110MToken returns random matrices of type typ shaped as the products of one rand110M
// token: 12 layers of Q, K, V, O, gate, up and down, then the output matrix.
func rand110MToken(r *rand.Rand, typ ggml.Type) []Matrix {
	var ms []Matrix
	for range 12 {
		for _, sh := range []struct{ rows, cols int }{{768, 768}, {768, 768}, {768, 768}, {768, 768}, {2048, 768}, {2048, 768}, {768, 2048}} {
			ms = append(ms, randomMatrix(r, typ, sh.rows, sh.cols))
		}
	}
	return append(ms, randomMatrix(r, typ, 32000, 768))
}

// BenchmarkDot is the attention score product over one head (64) and a 768-wide row.
func BenchmarkDot(b *testing.B) {
	for _, n := range []int{64, 768} {
		x := make([]float32, n)
		y := make([]float32, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			var s float32
			for b.Loop() {
				s += Dot(x, y)
			}
			_ = s
		})
	}
}

// BenchmarkParallelFor is the cost of handing a job to the pool and waiting for it, with
// nearly no work per chunk.
func BenchmarkParallelFor(b *testing.B) {
	var sink [64]float32
	for b.Loop() {
		parallelFor(64, 16, func(lo, hi int) { sink[lo]++ })
	}
}

// BenchmarkParallelForAfterGap is a forward pass's pattern: serial work (a norm, say), then a
// job of two 10 µs chunks. With both chunks in parallel a round costs gap + 10 µs; the
// overhead metric is what it costs beyond that (a worker woken from parked added 12-30 µs:
// the caller ran both chunks itself).
func BenchmarkParallelForAfterGap(b *testing.B) {
	busy := func(d time.Duration) {
		for t := time.Now(); time.Since(t) < d; {
		}
	}
	for _, gap := range []time.Duration{2 * time.Microsecond, 20 * time.Microsecond, 100 * time.Microsecond} {
		b.Run(gap.String(), func(b *testing.B) {
			for b.Loop() {
				busy(gap)
				parallelFor(2, 1, func(lo, hi int) { busy(10 * time.Microsecond) })
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)-float64(gap+10*time.Microsecond), "ns-overhead")
		})
	}
}

// BenchmarkSmallMatMul is attention's per-block products: the scores of a few queries against
// a cache block of 16 keys (16×64) and the weighted sum of its values (64×16), for an F32 and
// an F16 cache.
func BenchmarkSmallMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16} {
		for _, sh := range []struct{ rows, cols int }{{16, 64}, {64, 16}} {
			m := randomMatrix(r, typ, sh.rows, sh.cols)
			for _, n := range []int{1, 4} {
				x := randomActivations(r, n, sh.cols)
				out := make([]float32, n*sh.rows)
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						MatMul(out, m, x, n)
					}
				})
			}
		}
	}
}

// BenchmarkProductBoundaries streams one rand110M F32 token's weights (438 MB, larger than any
// cache) against one activation row twice: as the forward's 85 products (12 layers of Q, K,
// V, O, gate, up, down, then the output matrix) and as one product over a matrix of the same
// bytes. The difference is what the boundaries between products cost a memory-bound
// generation step (the workers' hand-over and wait at the end of each product, the chunks'
// streams starting again), since both read every byte once with the same kernel. The two
// alternate four times.
func BenchmarkProductBoundaries(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	ms := rand110MToken(r, ggml.F32)
	elems := 0
	for _, m := range ms {
		elems += m.Rows * m.Cols
	}
	whole := randomMatrix(r, ggml.F32, elems/768, 768)
	x := randomActivations(r, 1, 2048)
	out := make([]float32, elems/768)
	for range 4 { // alternating: the machine's memory speed drifts within minutes
		b.Run("products=85", func(b *testing.B) {
			b.SetBytes(int64(4 * elems))
			for b.Loop() {
				for _, m := range ms {
					MatMul(out[:m.Rows], m, x[:m.Cols], 1)
				}
			}
		})
		b.Run("products=1", func(b *testing.B) {
			b.SetBytes(int64(4 * elems))
			for b.Loop() {
				MatMul(out, whole, x[:768], 1)
			}
		})
	}
}
