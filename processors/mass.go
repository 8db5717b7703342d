package processors

import (
	"math"
	"math/bits"
	"slices"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fastmath"
)

// Top-p and typical-p both keep the shortest prefix of the set, in some order, whose
// probability mass reaches a target. Sorting the vocabulary to find it costs O(V log V)
// (llama.cpp's 11.7 ms per token at 152k); keepByMass instead needs two passes:
//
//  1. a histogram of the set by the ordering key, counting entries and summing their
//     unnormalised probabilities per bucket, which locates the bucket where the mass is
//     reached;
//  2. a pass that keeps every entry of the buckets before it and sets aside the entries of
//     that bucket, which alone are sorted (a few hundred at most for real distributions) to
//     find the exact cut; a vectorised mask (fastmath.MaskAbove) skips the entries that
//     cannot qualify.
//
// The ordering key is |a − logit|: with a = max logit it orders by descending probability
// (top-p), with a = −H + log Z by distance from the entropy (typical-p). Buckets are uniform
// in the key, 1/histScale wide, so bucket order agrees with key order exactly and only the
// boundary bucket needs sorting.
const (
	histBuckets = 1025
	// histScale is the number of buckets per unit of key (nat): ln 2 / 32 ≈ 0.022 nats
	// wide, so 1024 buckets cover keys up to 22 nats (a probability ratio of 4e-10); the
	// last bucket holds everything beyond.
	histScale = 32 / math.Ln2
	// smallSet is the size up to which an unsorted sparse set is simply sorted.
	smallSet = 128
)

type massHist struct {
	count [histBuckets]int32
	mass  [histBuckets]float64
}

func bucketOf(key float32) int {
	if k := key * histScale; k < histBuckets-1 {
		return int(k)
	}
	return histBuckets - 1
}

// keepByMass keeps the smallest prefix of c, in ascending order of |a − logit| (ties: the
// lower id), whose summed weight reaches target and that has at least minKeep entries.
// logits and e are aligned with the set (c.Logits() and the weights e[i] = Exp(logit − m) as
// fastmath.ExpShiftSum computes them); the weights of the boundary entries are recomputed
// with fastmath.Exp, which gives the same bits. When the whole set is needed (the target is
// not reached because of rounding, or minKeep exceeds the set) c is left unchanged. Banned
// entries are never among those chosen in the boundary bucket.
func keepByMass(c *core.Candidates, logits, e []float32, a, m float32, target float64, minKeep int) {
	var h massHist
	e = e[:len(logits)]
	for i, x := range logits {
		b := bucketOf(abs32(a - x))
		h.count[b]++
		h.mass[b] += float64(e[i])
	}
	var cum float64
	before, bnd := 0, -1
	for b := range histBuckets {
		if cum+h.mass[b] >= target && before+int(h.count[b]) >= minKeep {
			bnd = b
			break
		}
		cum += h.mass[b]
		before += int(h.count[b])
	}
	if bnd < 0 {
		return
	}

	boundary := c.ScratchItems(int(h.count[bnd]))[:0]
	row := c.Dense()
	var items []core.Candidate
	if row != nil {
		items = c.Buffer(len(row))
	} else {
		items = c.Items()
	}
	// Only entries with a − logit < (bnd+1)/histScale can be in the buckets up to bnd: a
	// vectorised mask of the logits above a slightly lower threshold finds them, and the
	// exact bucket decides. The last bucket is unbounded (every key beyond 22 nats), so
	// when it is the boundary every entry not banned qualifies.
	t := negInf
	if bnd < histBuckets-1 {
		reach := float32(bnd+1) / histScale
		t = a - reach - (1e-3 + 1e-6*(abs32(a)+reach))
	}
	w := 0
	var words [maskChunk / 64]uint64
	for base := 0; base < len(logits); base += maskChunk {
		end := min(base+maskChunk, len(logits))
		fastmath.MaskAbove(words[:], logits[base:end], t)
		for k, word := range words[:(end-base+63)/64] {
			for ; word != 0; word &= word - 1 {
				i := base + 64*k + bits.TrailingZeros64(word)
				x := logits[i]
				it := core.Candidate{ID: core.TokenID(i), Logit: x}
				if row == nil {
					it = items[i]
				}
				switch b := bucketOf(abs32(a - x)); {
				case b < bnd:
					items[w] = it
					w++
				case b == bnd && x > negInf:
					boundary = append(boundary, it)
				}
			}
		}
	}
	kept := items[:w]

	// Keys in float64: in the last bucket they may be far apart, even beyond float32's range.
	slices.SortFunc(boundary, func(x, y core.Candidate) int {
		kx, ky := math.Abs(float64(a)-float64(x.Logit)), math.Abs(float64(a)-float64(y.Logit))
		switch {
		case kx < ky:
			return -1
		case kx > ky:
			return 1
		}
		return int(x.ID) - int(y.ID)
	})
	n := 0
	for n < len(boundary) && (cum < target || len(kept)+n < minKeep) {
		cum += float64(fastmath.Exp(boundary[n].Logit - m))
		n++
	}
	// kept ends inside the set's own storage, before the entries it was taken from, so
	// this append writes into consumed positions.
	kept = append(kept, boundary[:n]...)
	c.SetItems(kept, false)
}
