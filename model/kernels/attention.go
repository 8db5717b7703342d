package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/loomlm/loom/model/ggml"
)

// The two products of attention over one block of the KV cache (cache.Span), for one query.
// The cache stores a block's keys transposed (HeadDim rows of BlockSize values) and its values
// row-major (a row per position), so that both products keep one position, or one output
// element, per vector lane and need no horizontal sums: the scores of 16 keys are 16 lanes
// of multiply-adds with the query's elements broadcast, and the output is multiply-adds of
// value rows with each probability broadcast. Every query is computed alone, in the same
// order, whatever else is in the batch.
//
// Q8_0 blocks (cache.Q8_0) hold each run of 32 elements as bytes with a half-precision scale,
// stored after the run: keys as HeadDim/32 groups of 8 rows, row t holding elements 4t … 4t+3
// of every key (each signed byte plus 128), followed by a row of BlockSize scales; values as
// rows of HeadDim signed bytes each followed by its HeadDim/32 scales. Keys are scored against
// the query quantized the same way (QuantizeQuery, as llama.cpp quantizes the query for its
// Q8_0 cache): per group the products of the bytes are summed as integers, exactly, four
// elements of sixteen keys an instruction (VPDPBUSD) where the CPU has AVX-512 VNNI. Values
// are widened to float32 and weighted by float32 probabilities.

// attnKernels are an implementation's attention kernels (nil: the generic ones).
type attnKernels struct {
	lanes  int                                                             // positions scores computes at a time
	scores [2]func(q *float32, k *byte, hd, bs, bstride int, out *float32) // F32, F16 keys
	// scores2 is scores for two queries (AttnScoresStrided), the second qstride bytes after
	// the first and its scores ostride bytes after the first's.
	scores2 [2]func(q *float32, qstride int, k *byte, hd, bs, bstride int, out *float32, ostride int)
	// accum[t][w] adds 16·2^w output elements (w = 0, 1, 2: 16, 32, 64).
	accum [2][3]func(p *float32, v *byte, vstride, nr int, acc *float32)
	// accum2[t][w], where not nil, is accum[t][w] for two queries (AttnAccumulateStrided),
	// the second's probabilities pstride bytes after the first's and its output astride
	// bytes.
	accum2 [2][3]func(p *float32, pstride int, v *byte, vstride, nr int, acc *float32, astride int)
	// scores4 and accum4, where not nil, are scores2 and accum2 for four queries
	// (AttnScoresStrided, AttnAccumulateStrided), each one's input and output the strides
	// after the one before's.
	scores4 [2]func(q *float32, qstride int, k *byte, hd, bs, bstride int, out *float32, ostride int)
	accum4  [2][3]func(p *float32, pstride int, v *byte, vstride, nr int, acc *float32, astride int)
	// scoresQ8 is AttnScoresQ8 (bs a multiple of lanes); accumQ8[w] adds 32·(w+1) output
	// elements of Q8_0 values (rows of vstride bytes; s points at the scales of the first
	// group, in row 0).
	scoresQ8 func(q *byte, k *byte, hd, bs int, out *float32)
	accumQ8  [2]func(p *float32, v, s *byte, vstride, nr int, acc *float32)
}

// q8Group is the elements per scale of Q8_0 cache blocks.
const q8Group = 32

// attnType returns the kernel index of a cache element type, 0 for F32 and 1 for F16, and
// its size in bytes.
func attnType(t ggml.Type) (index, size int) {
	switch t {
	case ggml.F32:
		return 0, 4
	case ggml.F16:
		return 1, 2
	}
	panic(fmt.Sprintf("kernels: attention over %v values (F32 or F16)", t))
}

// AttnScores sets out[r], r < bs, to the dot product of the query q (hd values) with key r of
// a block stored transposed: k holds hd rows of bs values of type t (F32 or F16), row d
// holding element d of every key. The sum over d runs in four chains, d mod 4, added as
// (c0+c1)+(c2+c3). For Q8_0 keys (hd a multiple of 32; layout above) the query is quantized
// first (QuantizeQuery) and the scores are AttnScoresQ8's: attention quantizes each query
// once and calls that for every block. It panics on mismatched lengths.
func AttnScores(out, q []float32, k []byte, t ggml.Type, hd, bs int) {
	if t == ggml.Q8_0 {
		if hd%q8Group != 0 || len(q) < hd {
			panic(fmt.Sprintf("kernels: AttnScores of Q8_0 keys %d wide: not a multiple of %d (or len(q) = %d short)", hd, q8Group, len(q)))
		}
		qq := make([]byte, Q8QueryBytes(hd))
		QuantizeQuery(qq, q[:hd])
		AttnScoresQ8(out, qq, k, hd, bs)
		return
	}
	ti, size := attnType(t)
	if len(out) < bs || len(q) < hd || len(k) < hd*bs*size {
		panic(fmt.Sprintf("kernels: AttnScores of %d×%d %v keys: len(q) = %d, len(k) = %d, len(out) = %d", hd, bs, t, len(q), len(k), len(out)))
	}
	if hd == 0 || bs == 0 {
		clear(out[:bs])
		return
	}
	if a := &currentImpl().attn; a.scores[ti] != nil && hd%4 == 0 && bs%a.lanes == 0 {
		f := a.scores[ti]
		f(&q[0], &k[0], hd, bs, bs*size, &out[0])
		return
	}
	for r := range bs {
		var c [4]float32
		for d := range hd {
			c[d%4] = fma32(q[d], attnElem(k, ti, d*bs+r), c[d%4])
		}
		out[r] = (c[0] + c[1]) + (c[2] + c[3])
	}
}

// AttnAccumulate adds Σ_{j<nr} p[j]·v[j] to acc (hd values), v holding nr rows of hd values of
// type t (F32 or F16); each element of acc is one chain of multiply-adds over j in order. For
// Q8_0 values (hd a multiple of 32; layout above) each term is (p[j]·s)·b, s the row's scale
// of the element's group and b its byte. It panics on mismatched lengths.
func AttnAccumulate(acc, p []float32, v []byte, t ggml.Type, hd, nr int) {
	if t == ggml.Q8_0 {
		attnAccumulateQ8(acc, p, v, hd, nr)
		return
	}
	ti, size := attnType(t)
	if len(acc) < hd || len(p) < nr || len(v) < nr*hd*size {
		panic(fmt.Sprintf("kernels: AttnAccumulate of %d×%d %v values: len(p) = %d, len(v) = %d, len(acc) = %d", nr, hd, t, len(p), len(v), len(acc)))
	}
	if nr == 0 || hd == 0 {
		return
	}
	k := &currentImpl().attn.accum[ti]
	d := 0
	if k[0] != nil {
		for _, w := range []int{2, 1, 0} {
			for cols := 16 << w; hd-d >= cols; d += cols {
				k[w](&p[0], &v[d*size], hd*size, nr, &acc[d])
			}
		}
	}
	accumulateFrom(acc, p, v, ti, hd, nr, d)
}

// accumulateFrom adds AttnAccumulate's sums to the elements of acc from d on, in Go: the
// columns past the last whole kernel's (all of them without assembly kernels).
func accumulateFrom(acc, p []float32, v []byte, ti, hd, nr, d int) {
	for ; d < hd; d++ {
		a := acc[d]
		for j := range nr {
			a = fma32(p[j], attnElem(v, ti, j*hd+d), a)
		}
		acc[d] = a
	}
}

// Q8KeyByte returns where element j (< 32) of the key at position pos lies within a group of
// a block of Q8_0 keys of bs positions (the layout above: row j/4, the position's four bytes,
// byte j mod 4). The byte there is the element's signed byte plus 128.
func Q8KeyByte(j, pos, bs int) int { return j/4*4*bs + 4*pos + j%4 }

// Q8QueryBytes is the size of a query of hd elements quantized by QuantizeQuery: 40 bytes a
// group of 32.
func Q8QueryBytes(hd int) int { return hd / q8Group * (q8Group + 8) }

// QuantizeQuery writes the query q (a multiple of 32 elements) to dst (Q8QueryBytes(len(q))
// bytes) quantized for AttnScoresQ8: per group of 32, its elements as QuantizeQ8_0 quantizes
// them (32 signed bytes), the group's half-precision scale as a float32, and −128 times the
// sum of the bytes as an int32 (which takes away the +128 of the keys' bytes). It panics on
// mismatched lengths.
func QuantizeQuery(dst []byte, q []float32) {
	hd := len(q)
	if hd%q8Group != 0 || len(dst) < Q8QueryBytes(hd) {
		panic(fmt.Sprintf("kernels: QuantizeQuery of %d values into %d bytes: want a multiple of %d values and %d bytes", hd, len(dst), q8Group, Q8QueryBytes(hd)))
	}
	var d [1]uint16
	for g := range hd / q8Group {
		grp := dst[g*(q8Group+8) : (g+1)*(q8Group+8)]
		QuantizeQ8_0(grp[:q8Group], d[:], q[g*q8Group:(g+1)*q8Group])
		sum := 0
		for _, b := range grp[:q8Group] {
			sum += int(int8(b))
		}
		binary.LittleEndian.PutUint32(grp[q8Group:], math.Float32bits(ggml.HalfToFloat32(d[0])))
		binary.LittleEndian.PutUint32(grp[q8Group+4:], uint32(int32(-128*sum)))
	}
}

// AttnScoresQ8 sets out[r], r < bs, to the score of a query quantized by QuantizeQuery (q)
// against key r of a block of Q8_0 keys (k, laid out as above; hd a multiple of 32): for each
// group of 32 elements in order, the integer sum of the products of the query's and the
// key's bytes (exact), converted to float32, is multiply-added times the key's scale times
// the query's (that product rounded to float32). It panics on mismatched lengths.
func AttnScoresQ8(out []float32, q, k []byte, hd, bs int) {
	if hd%q8Group != 0 {
		panic(fmt.Sprintf("kernels: AttnScores of Q8_0 keys %d wide: not a multiple of %d", hd, q8Group))
	}
	if len(out) < bs || len(q) < Q8QueryBytes(hd) || len(k) < hd/q8Group*(q8Group+2)*bs {
		panic(fmt.Sprintf("kernels: AttnScores of %d×%d Q8_0 keys: len(q) = %d, len(k) = %d, len(out) = %d", hd, bs, len(q), len(k), len(out)))
	}
	if hd == 0 || bs == 0 {
		clear(out[:bs])
		return
	}
	if a := &currentImpl().attn; a.scoresQ8 != nil && bs%a.lanes == 0 {
		a.scoresQ8(&q[0], &k[0], hd, bs, &out[0])
		return
	}
	for r := range bs {
		var o float32
		for g := range hd / q8Group {
			grp := k[g*(q8Group+2)*bs:]
			qg := q[g*(q8Group+8):]
			var sum int32
			for j := range q8Group {
				sum += int32(int8(qg[j])) * (int32(grp[Q8KeyByte(j, r, bs)]) - 128)
			}
			s := ggml.HalfToFloat32(le16(grp[q8Group*bs+2*r:])) * lef32(qg[q8Group:])
			o = fma32(float32(sum), s, o)
		}
		out[r] = o
	}
}

func attnAccumulateQ8(acc, p []float32, v []byte, hd, nr int) {
	rb := hd + hd/q8Group*2 // bytes of a row and its scales
	if hd%q8Group != 0 {
		panic(fmt.Sprintf("kernels: AttnAccumulate of Q8_0 values %d wide: not a multiple of %d", hd, q8Group))
	}
	if len(acc) < hd || len(p) < nr || len(v) < nr*rb {
		panic(fmt.Sprintf("kernels: AttnAccumulate of %d×%d Q8_0 values: len(p) = %d, len(v) = %d, len(acc) = %d", nr, hd, len(p), len(v), len(acc)))
	}
	if nr == 0 || hd == 0 {
		return
	}
	d := 0
	if k := &currentImpl().attn.accumQ8; k[0] != nil {
		for _, w := range []int{1, 0} {
			for cols := q8Group << w; hd-d >= cols; d += cols {
				k[w](&p[0], &v[d], &v[hd+2*(d/q8Group)], rb, nr, &acc[d])
			}
		}
	}
	for ; d < hd; d++ {
		a := acc[d]
		for j := range nr {
			row := v[j*rb:]
			w := p[j] * ggml.HalfToFloat32(le16(row[hd+2*(d/q8Group):]))
			a = fma32(w, float32(int8(row[d])), a)
		}
		acc[d] = a
	}
}

// Prefetch asks the CPU to bring b's cache lines in (at most the first 4 KiB) and returns at
// once: attention calls it for the next cache block while it computes the current one, since
// blocks lie anywhere in the pool where no hardware prefetcher would guess them. It is a hint
// (it changes no result) and does nothing in builds without assembly.
func Prefetch(b []byte) {
	if prefetchFn != nil && len(b) > 0 {
		prefetchFn(&b[0], min(len(b), 4096))
	}
}

// prefetchFn and prefetchL2Fn are the assembly's prefetches (to every cache level, to L2),
// nil without assembly kernels.
var prefetchFn, prefetchL2Fn func(p *byte, n int)

// attnElem returns element i of b, F32 (ti 0) or F16 (ti 1).
func attnElem(b []byte, ti, i int) float32 {
	if ti == 0 {
		return lef32(b[4*i:])
	}
	return ggml.HalfToFloat32(le16(b[2*i:]))
}

// fma32 is a·b + c rounded once to float64 and then to float32 (the assembly rounds once, to
// float32; the two differ in the last bit only in rare halfway cases).
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}
