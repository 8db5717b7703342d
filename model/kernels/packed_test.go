package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomlm/loom/model/ggml"
)

// TestPacked checks products of packed matrices (Q4_0, Q8_0, IQ4_NL) in every implementation: against the
// float64 reference within its bound, with the same bits whatever the batch (MatMul of n rows,
// as many as take the pairs kernel too, and MatVec of each), for whole-group slices (the rows of the full product, bit for bit) and
// other slices (unpacked), and where MatMuls shares out rows that cut the packed groups.
func TestPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	shapes := []struct{ rows, cols int }{{16, 128}, {37, 416}, {100, 96}, {300, 256}, {64, 704}, {70, 2048}, {16, 32}}
	for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q8_0, ggml.IQ4_NL} {
		for _, sh := range shapes {
			m := randomMatrix(r, typ, sh.rows, sh.cols)
			for _, impl := range implNames() {
				withImpl(t, impl, func() {
					pm := Pack(m)
					if impl == "generic" && pm.Packed() {
						t.Fatal("packed under the generic kernels: a copy of the weights for no faster kernel")
					}
					if !pm.Packed() {
						if currentImpl().packed[kernelOf(typ).kind][0] != nil {
							t.Fatalf("%v: not packed", impl)
						}
						return
					}
					for _, n := range []int{1, 2, 3, 4, 5, 9, pairRows, pairRows + 6} {
						name := fmt.Sprintf("%v/%dx%d/n=%d/%s", typ, sh.rows, sh.cols, n, impl)
						x := randomActivations(r, n, sh.cols)
						want, bound := reference(m, x, n)
						got := make([]float32, n*m.Rows)
						for k := range got {
							got[k] = float32(math.NaN())
						}
						dirtyScratch()
						MatMul(got, pm, x, n)
						for k := range got {
							if d := math.Abs(float64(got[k]) - want[k]); !(d <= bound[k]) {
								t.Fatalf("%s: out[%d] = %g, want %g ± %g", name, k, got[k], want[k], bound[k])
							}
						}
						one := make([]float32, m.Rows)
						for i := range n {
							MatVec(one, pm, x[i*sh.cols:(i+1)*sh.cols])
							for k, v := range one {
								if b := got[i*m.Rows+k]; math.Float32bits(b) != math.Float32bits(v) {
									t.Fatalf("%s: row %d of activation %d: batch %g, alone %g", name, k, i, b, v)
								}
							}
						}
						// Slices: whole groups share the packed rows; others fall back.
						for _, sl := range [][2]int{{0, 16}, {16, m.Rows}, {3, min(m.Rows, 29)}} {
							if sl[1] <= sl[0] {
								continue
							}
							s := pm.Slice(sl[0], sl[1])
							if wantPacked := sl[0]%16 == 0; s.Packed() != wantPacked {
								t.Fatalf("%s: slice %v packed %v", name, sl, s.Packed())
							}
							part := make([]float32, n*s.Rows)
							MatMul(part, s, x, n)
							for i := range n {
								for k := range s.Rows {
									g, w := part[i*s.Rows+k], got[i*m.Rows+sl[0]+k]
									if s.Packed() && math.Float32bits(g) != math.Float32bits(w) {
										t.Fatalf("%s: slice %v row %d: %g, full product %g", name, sl, k, g, w)
									}
									j := i*m.Rows + sl[0] + k
									if d := math.Abs(float64(g) - want[j]); !(d <= bound[j]) {
										t.Fatalf("%s: slice %v row %d = %g, want %g ± %g", name, sl, k, g, want[j], bound[j])
									}
								}
							}
						}
						// MatMuls with a first matrix of 37 rows: the shared index space cuts the
						// packed matrix's groups.
						first := randomMatrix(r, typ, 37, sh.cols)
						outs := [][]float32{make([]float32, n*37), make([]float32, n*m.Rows)}
						MatMuls(outs, []Matrix{first, pm}, x, n)
						for k, v := range outs[1] {
							if math.Float32bits(v) != math.Float32bits(got[k]) {
								t.Fatalf("%s: MatMuls out[%d] = %g, MatMul %g", name, k, v, got[k])
							}
						}
					}
				})
			}
		}
	}
}

// TestPackedAssemblyMatchesGeneric checks the packed assembly kernels against the pure-Go
// ones, which differ only in rounding the multiply-add twice.
func TestPackedAssemblyMatchesGeneric(t *testing.T) {
	if asmImpl == nil || asmImpl.packed[kQ4_0][0] == nil {
		t.Skip("no packed assembly kernels on this CPU or build")
	}
	r := rand.New(rand.NewPCG(23, 24))
	for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q8_0, ggml.IQ4_NL} {
		m := randomMatrix(r, typ, 48, 1056)
		pm := Pack(m)
		for _, n := range []int{1, 2, 3, 4, 7} {
			x := randomActivations(r, n, m.Cols)
			a := make([]float32, n*m.Rows)
			g := make([]float32, n*m.Rows)
			withImpl(t, "generic", func() { MatMul(g, pm, x, n) })
			withImpl(t, asmImpl.name, func() { MatMul(a, pm, x, n) })
			for k := range a {
				if d := math.Abs(float64(a[k] - g[k])); d > 1e-5*math.Abs(float64(g[k]))+1e-6 {
					t.Fatalf("%v n=%d: out[%d]: assembly %g, generic %g", typ, n, k, a[k], g[k])
				}
			}
		}
	}
}

// TestPackedPairsMatchGroups checks the kernel over pairs of groups of 16 packed rows against
// the 4-row kernel over each group, bit for bit: blocks per row from 1 to past two of its
// 4-block iterations (a tail of 1–3 blocks), one to three pairs, activation rows at a
// stride wider than a row.
func TestPackedPairsMatchGroups(t *testing.T) {
	im := asmImpl
	if im == nil || im.packedPairs[kQ8_0] == nil {
		t.Skip("no pairs kernel on this CPU or build")
	}
	r := rand.New(rand.NewPCG(25, 26))
	pairs, k := im.packedPairs[kQ8_0], im.packed[kQ8_0][3]
	for _, nb := range []int{1, 2, 3, 4, 5, 7, 8, 9, 24} {
		for _, np := range []int{1, 2, 3} {
			m := Pack(randomMatrix(r, ggml.Q8_0, 32*np, 32*nb))
			a := prepare(im, kernelOf(ggml.Q8_0).act, randomActivations(r, 4, m.Cols), 4, m.Cols)
			got, want := make([]float32, 4*m.Rows), make([]float32, 4*m.Rows)
			for i := range got {
				got[i] = float32(math.NaN())
			}
			pairs(&m.packed.data[0], np, nb, &a.b[0], a.stride, &got[0], m.Rows)
			for g := range 2 * np {
				k(&m.packed.data[g*m.packed.groupBytes], 1, nb, &a.b[0], a.stride, &want[g*16], m.Rows)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%d blocks, %d pairs: out[%d] = %g, groups one by one %g", nb, np, i, got[i], want[i])
				}
			}
			a.release()
		}
	}
}
