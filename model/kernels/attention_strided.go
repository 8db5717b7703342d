package kernels

import (
	"fmt"

	"github.com/loomlm/loom/model/ggml"
)

// AttnScoresStrided is AttnScores for n queries (1, 2 or 4) against the same keys, evenly
// spaced: query j is q[j·qstride:][:hd] and its scores go to out[j·ostride:][:bs], each
// query's with AttnScores' bits. ostride must be at least bs, so the outputs are apart.
// Attention over a cache block that several rows, or several query heads of one key/value
// head, read calls it once for all of them, each key row loaded once for the queries; with
// the queries' and outputs' spacing given, checking the call costs a few comparisons (four
// separate slices took as long to check as the kernel, 36 of 89 ns, took to score a block of
// 16 positions). F32 and F16 keys go through the several-query kernels; Q8_0 keys a query
// at a time, as AttnScores takes them (each query quantized in the call: attention over many
// blocks quantizes its queries once and calls AttnScoresQ8). It panics on mismatched lengths.
func AttnScoresStrided(out []float32, ostride int, q []float32, qstride, n int, k []byte, t ggml.Type, hd, bs int) {
	if n != 1 && n != 2 && n != 4 || ostride < bs || qstride < 0 ||
		len(out) < (n-1)*ostride+bs || len(q) < (n-1)*qstride+hd {
		panic(fmt.Sprintf("kernels: AttnScoresStrided of %d queries against %d×%d %v keys: len(q) = %d (stride %d), len(out) = %d (stride %d)",
			n, hd, bs, t, len(q), qstride, len(out), ostride))
	}
	a := &currentImpl().attn
	var ti, size int
	alone := t == ggml.Q8_0 || hd == 0 || bs == 0
	if !alone {
		ti, size = attnType(t)
		if len(k) < hd*bs*size {
			panic(fmt.Sprintf("kernels: AttnScoresStrided against %d×%d %v keys: len(k) = %d", hd, bs, t, len(k)))
		}
		alone = a.scores[ti] == nil || hd%4 != 0 || bs%a.lanes != 0 // lanes is set where scores is
	}
	if alone { // a query at a time, as AttnScores takes them
		for j := range n {
			AttnScores(out[j*ostride:], q[j*qstride:], k, t, hd, bs)
		}
		return
	}
	if n == 4 && a.scores4[ti] != nil {
		a.scores4[ti](&q[0], 4*qstride, &k[0], hd, bs, bs*size, &out[0], 4*ostride)
		return
	}
	for j := 0; j < n; {
		if n-j >= 2 && a.scores2[ti] != nil {
			a.scores2[ti](&q[j*qstride], 4*qstride, &k[0], hd, bs, bs*size, &out[j*ostride], 4*ostride)
			j += 2
			continue
		}
		a.scores[ti](&q[j*qstride], &k[0], hd, bs, bs*size, &out[j*ostride])
		j++
	}
}

// AttnAccumulateStrided is AttnAccumulate for n queries (1, 2 or 4) over the same values,
// evenly spaced: query j's probabilities are p[j·pstride:][:nr] and its weighted sum is added
// to acc[j·astride:][:hd], each with AttnAccumulate's bits. astride must be at least hd, so
// the outputs are apart. F32 and F16 values go through the several-query kernels; Q8_0 values
// a query at a time. It panics on mismatched lengths.
func AttnAccumulateStrided(acc []float32, astride int, p []float32, pstride, n int, v []byte, t ggml.Type, hd, nr int) {
	if n != 1 && n != 2 && n != 4 || astride < hd || pstride < 0 ||
		len(acc) < (n-1)*astride+hd || len(p) < (n-1)*pstride+nr {
		panic(fmt.Sprintf("kernels: AttnAccumulateStrided of %d queries over %d×%d %v values: len(p) = %d (stride %d), len(acc) = %d (stride %d)",
			n, nr, hd, t, len(p), pstride, len(acc), astride))
	}
	a := &currentImpl().attn
	if t == ggml.Q8_0 || nr == 0 || hd == 0 || a.accum[0][0] == nil {
		for j := range n {
			AttnAccumulate(acc[j*astride:], p[j*pstride:], v, t, hd, nr)
		}
		return
	}
	ti, size := attnType(t)
	if len(v) < nr*hd*size {
		panic(fmt.Sprintf("kernels: AttnAccumulateStrided over %d×%d %v values: len(v) = %d", nr, hd, t, len(v)))
	}
	d := 0
	for _, w := range []int{2, 1, 0} {
		for cols := 16 << w; hd-d >= cols; d += cols {
			vd := &v[d*size]
			switch {
			case n == 4 && a.accum4[ti][w] != nil:
				a.accum4[ti][w](&p[0], 4*pstride, vd, hd*size, nr, &acc[d], 4*astride)
				continue
			case n >= 2 && a.accum2[ti][w] != nil:
				for j := 0; j < n; j += 2 {
					a.accum2[ti][w](&p[j*pstride], 4*pstride, vd, hd*size, nr, &acc[j*astride+d], 4*astride)
				}
				continue
			}
			for j := range n {
				a.accum[ti][w](&p[j*pstride], vd, hd*size, nr, &acc[j*astride+d])
			}
		}
	}
	for j := range n {
		accumulateFrom(acc[j*astride:], p[j*pstride:], v, ti, hd, nr, d)
	}
}
