package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/model/ggml"
)

// attnData returns n random values of type t (F32 or F16) and their float64 values.
func attnData(r *rand.Rand, t ggml.Type, n int) ([]byte, []float64) {
	_, size := attnType(t)
	b := make([]byte, n*size)
	f := make([]float64, n)
	for i := range n {
		v := float32(r.NormFloat64())
		if t == ggml.F16 {
			h := ggml.Float32ToHalf(v)
			b[2*i], b[2*i+1] = byte(h), byte(h>>8)
			f[i] = float64(ggml.HalfToFloat32(h))
			continue
		}
		u := math.Float32bits(v)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		f[i] = float64(v)
	}
	return b, f
}

// q8Keys returns a Q8_0 block of bs random keys of hd elements (in groups of 8 rows of 4
// bytes a key, plus 128, and a row of scales: cache.Span's layout) and their float64 values,
// element d of key r at d·bs+r.
func q8Keys(r *rand.Rand, hd, bs int) ([]byte, []float64) {
	b := make([]byte, hd/q8Group*(q8Group+2)*bs)
	f := make([]float64, hd*bs)
	for g := range hd / q8Group {
		grp := b[g*(q8Group+2)*bs:]
		for pos := range bs {
			h := ggml.Float32ToHalf(float32(r.Float64() / 64))
			grp[q8Group*bs+2*pos], grp[q8Group*bs+2*pos+1] = byte(h), byte(h>>8)
			for j := range q8Group {
				x := int8(r.IntN(255) - 127)
				grp[Q8KeyByte(j, pos, bs)] = byte(x) ^ 0x80
				f[(g*q8Group+j)*bs+pos] = float64(x) * float64(ggml.HalfToFloat32(h))
			}
		}
	}
	return b, f
}

// q8Values returns nr Q8_0 rows of hd random values (each row's bytes, then its scales) and
// their float64 values, element d of row j at j·hd+d.
func q8Values(r *rand.Rand, nr, hd int) ([]byte, []float64) {
	rb := hd + hd/q8Group*2
	b := make([]byte, nr*rb)
	f := make([]float64, nr*hd)
	for j := range nr {
		row := b[j*rb:]
		for g := range hd / q8Group {
			h := ggml.Float32ToHalf(float32(r.Float64() / 64))
			row[hd+2*g], row[hd+2*g+1] = byte(h), byte(h>>8)
			for e := g * q8Group; e < (g+1)*q8Group; e++ {
				x := int8(r.IntN(255) - 127)
				row[e] = byte(x)
				f[j*hd+e] = float64(x) * float64(ggml.HalfToFloat32(h))
			}
		}
	}
	return b, f
}

// TestAttention checks AttnScores and AttnAccumulate in every implementation against float64
// sums (within the float32 rounding of the terms), for head widths and block sizes the
// assembly takes and ones it leaves to Go, and the assembly against the Go code.
func TestAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0} {
		for _, sh := range []struct{ hd, bs, nr int }{{64, 16, 16}, {64, 16, 5}, {128, 32, 31}, {96, 16, 16}, {80, 64, 40}, {256, 16, 3}, {6, 8, 7}, {64, 48, 1}, {32, 8, 7}, {160, 24, 24}} {
			if typ == ggml.Q8_0 && sh.hd%q8Group != 0 {
				continue
			}
			q := make([]float32, sh.hd)
			for i := range q {
				q[i] = float32(r.NormFloat64())
			}
			qf := make([]float64, sh.hd) // the query the scores see: Q8_0 keys' quantized
			for i, x := range q {
				qf[i] = float64(x)
			}
			if typ == ggml.Q8_0 {
				qq := make([]byte, Q8QueryBytes(sh.hd))
				QuantizeQuery(qq, q)
				for i := range qf {
					grp := qq[i/q8Group*(q8Group+8):]
					qf[i] = float64(int8(grp[i%q8Group])) * float64(lef32(grp[q8Group:]))
				}
			}
			var k, v []byte
			var kf, vf []float64
			if typ == ggml.Q8_0 {
				k, kf = q8Keys(r, sh.hd, sh.bs)
				v, vf = q8Values(r, sh.nr, sh.hd)
			} else {
				k, kf = attnData(r, typ, sh.hd*sh.bs)
				v, vf = attnData(r, typ, sh.nr*sh.hd)
			}
			p := make([]float32, sh.nr)
			for i := range p {
				p[i] = r.Float32()
			}
			acc0 := make([]float32, sh.hd)
			for i := range acc0 {
				acc0[i] = float32(r.NormFloat64())
			}
			results := map[string][2][]float32{}
			for _, impl := range implNames() {
				name := fmt.Sprintf("%v/hd=%d/bs=%d/nr=%d/%s", typ, sh.hd, sh.bs, sh.nr, impl)
				scores := make([]float32, sh.bs)
				acc := append([]float32(nil), acc0...)
				withImpl(t, impl, func() {
					AttnScores(scores, q, k, typ, sh.hd, sh.bs)
					AttnAccumulate(acc, p, v, typ, sh.hd, sh.nr)
				})
				for j := range sh.bs {
					var want, mag float64
					for d := range sh.hd {
						want += qf[d] * kf[d*sh.bs+j]
						mag += math.Abs(qf[d] * kf[d*sh.bs+j])
					}
					if d := math.Abs(float64(scores[j]) - want); d > 1e-6*mag+1e-7 {
						t.Fatalf("%s: score %d = %g, want %g", name, j, scores[j], want)
					}
				}
				for d := range sh.hd {
					want, mag := float64(acc0[d]), math.Abs(float64(acc0[d]))
					for j := range sh.nr {
						want += float64(p[j]) * vf[j*sh.hd+d]
						mag += math.Abs(float64(p[j]) * vf[j*sh.hd+d])
					}
					if e := math.Abs(float64(acc[d]) - want); e > 1e-6*mag+1e-7 {
						t.Fatalf("%s: acc[%d] = %g, want %g", name, d, acc[d], want)
					}
				}
				results[impl] = [2][]float32{scores, acc}
			}
			g := results["generic"]
			for impl, res := range results {
				for i := range 2 {
					for j, x := range res[i] {
						if y := g[i][j]; typ == ggml.Q8_0 && i == 0 && x != y { // integer sums, the same float steps
							t.Fatalf("%v hd=%d bs=%d: %s score %d = %g, generic %g (want the same bits)", typ, sh.hd, sh.bs, impl, j, x, y)
						}
						if y := g[i][j]; math.Abs(float64(x-y)) > 1e-6*math.Abs(float64(y))+1e-7 {
							t.Fatalf("%v hd=%d bs=%d: %s result %d[%d] = %g, generic %g", typ, sh.hd, sh.bs, impl, i, j, x, y)
						}
					}
				}
			}
		}
	}
}

// BenchmarkAttention times the two kernels on one cache block (64-wide heads, 16 positions);
// for Q8_0 keys "scores" quantizes the query in every call, "scores/Q8_0/quantized" once;
// "scores2" and "accumulate2" take two queries an op (AttnScoresStrided,
// AttnAccumulateStrided).
func BenchmarkAttention(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0} {
		k, _ := attnData(r, ggml.F32, 64*16) // big enough for every type's block
		q := make([]float32, 64)
		out := make([]float32, 16)
		b.Run(fmt.Sprintf("scores/%v", typ), func(b *testing.B) {
			for b.Loop() {
				AttnScores(out, q, k, typ, 64, 16)
			}
		})
		if typ != ggml.Q8_0 { // two queries of one key/value head: two scores an op
			q2, out2 := make([]float32, 2*64), make([]float32, 2*16)
			b.Run(fmt.Sprintf("scores2/%v", typ), func(b *testing.B) {
				for b.Loop() {
					AttnScoresStrided(out2, 16, q2, 64, 2, k, typ, 64, 16)
				}
			})
		}
		if typ == ggml.Q8_0 { // the query quantized once, as attention does
			qq := make([]byte, Q8QueryBytes(64))
			QuantizeQuery(qq, q)
			b.Run("scores/Q8_0/quantized", func(b *testing.B) {
				for b.Loop() {
					AttnScoresQ8(out, qq, k, 64, 16)
				}
			})
		}
		acc := make([]float32, 64)
		b.Run(fmt.Sprintf("accumulate/%v", typ), func(b *testing.B) {
			for b.Loop() {
				AttnAccumulate(acc, out, k, typ, 64, 16)
			}
		})
		if typ != ggml.Q8_0 {
			acc2, p2 := make([]float32, 2*64), make([]float32, 2*16)
			b.Run(fmt.Sprintf("accumulate2/%v", typ), func(b *testing.B) {
				for b.Loop() {
					AttnAccumulateStrided(acc2, 64, p2, 16, 2, k, typ, 64, 16)
				}
			})
		}
	}
}

// TestAttentionQ8NeedsGroupsOf32 checks that a Q8_0 head whose width is not a multiple of 32
// panics saying so, in both kernels.
func TestAttentionQ8NeedsGroupsOf32(t *testing.T) {
	for name, call := range map[string]func(){
		"AttnScores":     func() { AttnScores(make([]float32, 16), make([]float32, 48), make([]byte, 4096), ggml.Q8_0, 48, 16) },
		"AttnAccumulate": func() { AttnAccumulate(make([]float32, 48), make([]float32, 4), make([]byte, 4096), ggml.Q8_0, 48, 4) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "48 wide: not a multiple of 32") {
					t.Errorf("%s of a 48-wide Q8_0 head: panic %v", name, r)
				}
			}()
			call()
		}()
	}
}

// TestAttnScoresQ8Extremes checks AttnScoresQ8 in every implementation on the largest sums a
// group can make (query bytes ±127, key bytes −128 and 127, each sign throughout a group and
// mixed) against the exact integer sums times the scales: the integer part must be exact.
func TestAttnScoresQ8Extremes(t *testing.T) {
	const hd, bs = 64, 48
	r := rand.New(rand.NewPCG(7, 8))
	q := make([]float32, hd)
	for i := range q {
		q[i] = 1
		if i >= 32 && r.IntN(2) == 0 {
			q[i] = -1
		}
	}
	qq := make([]byte, Q8QueryBytes(hd))
	QuantizeQuery(qq, q)
	k := make([]byte, hd/q8Group*(q8Group+2)*bs)
	key := func(g, j, pos int) *byte { return &k[g*(q8Group+2)*bs+Q8KeyByte(j, pos, bs)] }
	for g := range hd / q8Group {
		for pos := range bs {
			h := ggml.Float32ToHalf(0.5)
			k[g*(q8Group+2)*bs+q8Group*bs+2*pos], k[g*(q8Group+2)*bs+q8Group*bs+2*pos+1] = byte(h), byte(h>>8)
			for j := range q8Group {
				var x int
				switch pos % 3 {
				case 0:
					x = -128
				case 1:
					x = 127
				default:
					x = []int{-128, 127}[r.IntN(2)]
				}
				*key(g, j, pos) = byte(x + 128)
			}
		}
	}
	for _, impl := range implNames() {
		out := make([]float32, bs)
		withImpl(t, impl, func() { AttnScoresQ8(out, qq, k, hd, bs) })
		for pos := range bs {
			var want float64
			for g := range hd / q8Group {
				grp := qq[g*(q8Group+8):]
				var sum int64
				for j := range q8Group {
					sum += int64(int8(grp[j])) * (int64(*key(g, j, pos)) - 128)
				}
				want += float64(sum) * float64(float32(0.5)*lef32(grp[q8Group:]))
			}
			if math.Abs(float64(out[pos])-want) > 1e-6*math.Abs(want) {
				t.Errorf("%s: key %d score %g, want %g", impl, pos, out[pos], want)
			}
		}
	}
}

// randomKeys returns a block of bs random keys of hd elements of type typ, as a cache stores
// them (transposed; Q8_0 in its own layout).
func randomKeys(r *rand.Rand, typ ggml.Type, hd, bs int) []byte {
	if typ == ggml.Q8_0 {
		k, _ := q8Keys(r, hd, bs)
		return k
	}
	k, _ := attnData(r, typ, hd*bs)
	return k
}

// randomValues returns nr random value rows of hd elements of type typ, as a cache stores
// them.
func randomValues(r *rand.Rand, typ ggml.Type, nr, hd int) []byte {
	if typ == ggml.Q8_0 {
		v, _ := q8Values(r, nr, hd)
		return v
	}
	v, _ := attnData(r, typ, nr*hd)
	return v
}

// TestAttnStridedMatchesOneQuery checks AttnScoresStrided and AttnAccumulateStrided against
// AttnScores and AttnAccumulate a query at a time, bit for bit over the whole output buffer
// (what lies between the outputs stays as it was), in every implementation: one, two and
// four queries, inputs and outputs packed or with gaps, F32, F16 and Q8_0 keys and values,
// of widths every kernel and the tails take.
func TestAttnStridedMatchesOneQuery(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, impl := range implNames() {
		for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0} {
			for _, sh := range []struct{ hd, bs, nr int }{{64, 16, 16}, {64, 16, 5}, {128, 32, 31}, {96, 48, 48}, {6, 8, 7}, {32, 8, 1}, {160, 24, 24}, {80, 16, 9}, {256, 16, 3}, {4, 16, 1}, {112, 16, 5}} {
				if typ == ggml.Q8_0 && sh.hd%q8Group != 0 {
					continue
				}
				k, v := randomKeys(r, typ, sh.hd, sh.bs), randomValues(r, typ, sh.nr, sh.hd)
				for _, n := range []int{1, 2, 4} {
					for _, gap := range []int{0, 3} {
						name := fmt.Sprintf("%s, %v %+v, %d queries, gap %d", impl, typ, sh, n, gap)
						in := make([]float32, n*(sh.hd+gap))
						for i := range in {
							in[i] = float32(r.NormFloat64())
						}
						qstride, ostride := sh.hd+gap, sh.bs+gap
						checkStrided(t, name+", scores", r, impl, n*ostride, func(want []float32) {
							for j := range n {
								AttnScores(want[j*ostride:], in[j*qstride:], k, typ, sh.hd, sh.bs)
							}
						}, func(got []float32) { AttnScoresStrided(got, ostride, in, qstride, n, k, typ, sh.hd, sh.bs) })
						pstride, astride := sh.nr+gap, sh.hd+gap
						ps := make([]float32, n*pstride)
						for i := range ps {
							ps[i] = r.Float32()
						}
						checkStrided(t, name+", sums", r, impl, n*astride, func(want []float32) {
							for j := range n {
								AttnAccumulate(want[j*astride:], ps[j*pstride:], v, typ, sh.hd, sh.nr)
							}
						}, func(got []float32) { AttnAccumulateStrided(got, astride, ps, pstride, n, v, typ, sh.hd, sh.nr) })
					}
				}
			}
		}
	}
}

// checkStrided runs one (the calls a query at a time) and strided (the strided call) in
// implementation impl on buffers of size random values, the same for both, and requires the
// same bits everywhere in them.
func checkStrided(t *testing.T, name string, r *rand.Rand, impl string, size int, one, strided func([]float32)) {
	t.Helper()
	got := make([]float32, size)
	for i := range got {
		got[i] = float32(r.NormFloat64())
	}
	want := slices.Clone(got)
	withImpl(t, impl, func() {
		one(want)
		strided(got)
	})
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d is %g, one query at a time %g", name, i, got[i], want[i])
		}
	}
}

// TestAttnStridedPanics checks that the strided calls refuse outputs that overlap, a query
// count the kernels do not take and buffers too short, saying so.
func TestAttnStridedPanics(t *testing.T) {
	k := make([]byte, 64*16*4)
	q, out := make([]float32, 4*64), make([]float32, 4*16)
	for _, tc := range []struct {
		name string
		call func()
	}{
		{"outputs overlap", func() { AttnScoresStrided(out, 8, q, 64, 2, k, ggml.F32, 64, 16) }},
		{"three queries", func() { AttnScoresStrided(out, 16, q, 64, 3, k, ggml.F32, 64, 16) }},
		{"short output", func() { AttnScoresStrided(out[:40], 16, q, 64, 4, k, ggml.F32, 64, 16) }},
		{"short queries", func() { AttnScoresStrided(out, 16, q[:200], 64, 4, k, ggml.F32, 64, 16) }},
		{"short sums", func() { AttnAccumulateStrided(q[:100], 64, out, 16, 2, k, ggml.F32, 64, 16) }},
		{"sums overlap", func() { AttnAccumulateStrided(q, 32, out, 16, 2, k, ggml.F32, 64, 16) }},
	} {
		func() {
			defer func() {
				if e := recover(); e == nil || !strings.Contains(fmt.Sprint(e), "Strided") {
					t.Errorf("%s: panic %v, want one naming the call", tc.name, e)
				}
			}()
			tc.call()
		}()
	}
}
