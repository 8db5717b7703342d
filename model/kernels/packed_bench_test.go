package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loomlm/loom/model/ggml"
)

// BenchmarkPacked compares the products of packed matrices (Q4_0, Q8_0, IQ4_NL) with the
// row-major kernels' on the rand110M shapes. Where the kernels have no packed layout (no
// AVX-512 VNNI), "packed" runs the row-major kernels too.
func BenchmarkPacked(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q8_0, ggml.IQ4_NL} {
		for _, sh := range benchShapes[:3] {
			benchPacked(b, r, typ, sh.rows, sh.cols)
		}
	}
}

// benchPacked times MatMul of a rows × cols matrix of typ, row-major and packed.
func benchPacked(b *testing.B, r *rand.Rand, typ ggml.Type, rows, cols int) {
	m := randomMatrix(r, typ, rows, cols)
	pm := Pack(m)
	for _, n := range []int{1, 4, 16, 128} {
		x := randomActivations(r, n, cols)
		out := make([]float32, n*rows)
		for _, c := range []struct {
			name string
			m    Matrix
		}{{"rowmajor", m}, {"packed", pm}} {
			b.Run(fmt.Sprintf("%v/%dx%d/n=%d/%s", typ, rows, cols, n, c.name), func(b *testing.B) {
				b.SetBytes(int64(len(m.Data)))
				for b.Loop() {
					MatMul(out, c.m, x, n)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
			})
		}
	}
}

// BenchmarkPack times packing a 2048×768 matrix of each packed type (MB/s of GGUF data).
func BenchmarkPack(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q8_0} {
		m := randomMatrix(r, typ, 2048, 768)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(m.Data)))
			for b.Loop() {
				Pack(m)
			}
		})
	}
}

// BenchmarkPackedForward times the products of one rand110M token (its 85 matrices, 117 MB,
// streamed from memory) with Q8_0 weights packed as a model loads them, for batches of
// activation rows (decoding steps of several sequences, a prompt).
func BenchmarkPackedForward(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	ms := rand110MToken(r, ggml.Q8_0)
	for i := range ms {
		ms[i] = Pack(ms[i])
	}
	for _, n := range []int{4, 8, 16, 32, 128} {
		x := randomActivations(r, n, 2048)
		out := make([]float32, n*32000)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				for _, m := range ms {
					MatMul(out[:n*m.Rows], m, x[:n*m.Cols], n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
