package processors

import (
	"math"
	"math/bits"
	"slices"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fastmath"
)

// TopP is nucleus sampling (Holtzman et al. 2019): with the tokens ordered by descending
// probability (equal logits: the lower id first), it keeps the shortest prefix whose
// cumulative probability reaches p — the token that crosses p is kept — and never fewer than
// minKeep tokens:
//
//	keep i ⇔ rank(i) ≤ max(minKeep, min{ r : Σ_{rank(j) ≤ r} p(j) ≥ p })
//
// and renormalises over the kept tokens (p'(i) ∝ p(i)). p = 1 disables it; p = 0 keeps the
// single most likely token (the lowest id among equal logits), or the minKeep most likely, as
// llama.cpp does.
//
// minKeep counts tokens not banned and ranks them by logit, ties by the lower id: when the
// prefix that reaches p is shorter than minKeep, the kept set is exactly the minKeep largest
// logits, however far below the maximum they lie (their probabilities may round to 0).
//
// Engines differ only when a prefix sums to exactly p; Boundary chooses (NewTopPBoundary):
//
//   - Inclusive (the default, NewTopP): a prefix whose sum equals p is enough — Σ ≥ p above.
//     llama.cpp (cum_sum >= p), Hugging Face transformers' TopPLogitsWarper (it removes the
//     tail whose ascending cumulative sum is ≤ 1 − p) and vLLM (the same mask) do this.
//   - Exclusive: the kept mass must exceed p — Σ > p above — so at exact equality one more
//     token is kept. This is the classic top_k_top_p_filtering recipe (remove where the
//     descending cumulative sum is > p, shifted right by one) of older transformers releases
//     and of many hand-written sampling loops.
//
// With real logits exact equality is rare; it happens with tied logits, e.g. four equal ones
// and p = 0.5: inclusive keeps two tokens, exclusive three.
//
// On a sorted set (after top-k) it walks the prefix, O(kept). On a dense row it never sorts
// the vocabulary: a histogram of the probabilities locates the cut and only the tokens in the
// boundary bucket are sorted (see nucleus): a maximum, an exponential pass, one scalar
// histogram pass and one pass that skips the dropped tokens eight at a time. The result is
// then sparse and in id order, not sorted. NaN or +Inf logits and an all-banned set are
// errors.
type TopP struct {
	p         float64
	minKeep   int
	exclusive bool
}

// Boundary says whether a top-p prefix whose probability equals p exactly is enough.
type Boundary int

const (
	// Inclusive keeps the shortest prefix with Σ ≥ p (llama.cpp, transformers, vLLM).
	Inclusive Boundary = iota
	// Exclusive keeps the shortest prefix with Σ > p (the classic top_k_top_p_filtering).
	Exclusive
)

// ParseBoundary reads a boundary as written in pipelines: "inclusive" or "exclusive".
func ParseBoundary(s string) (Boundary, error) {
	switch s {
	case "inclusive":
		return Inclusive, nil
	case "exclusive":
		return Exclusive, nil
	}
	return 0, &core.ParamError{Param: "boundary", Value: s, Reason: `must be "inclusive" or "exclusive"`}
}

// String returns the boundary as written in pipelines.
func (b Boundary) String() string {
	if b == Exclusive {
		return "exclusive"
	}
	return "inclusive"
}

// NewTopP returns a top-p processor with the inclusive boundary; p must be in [0, 1] and
// minKeep ≥ 1.
func NewTopP(p float64, minKeep int) (*TopP, error) {
	return NewTopPBoundary(p, minKeep, Inclusive)
}

// NewTopPBoundary returns a top-p processor with the given boundary.
func NewTopPBoundary(p float64, minKeep int, b Boundary) (*TopP, error) {
	if err := checkFloat("p", p, unitInterval, "1 disables, 0 keeps the most likely token"); err != nil {
		return nil, err
	}
	if err := checkMinKeep(minKeep); err != nil {
		return nil, err
	}
	if b != Inclusive && b != Exclusive {
		return nil, &core.ParamError{Param: "boundary", Value: int(b), Reason: "unknown boundary"}
	}
	return &TopP{p: p, minKeep: minKeep, exclusive: b == Exclusive}, nil
}

// reached reports whether a cumulative probability cum has reached target: cum ≥ target, or
// with the exclusive boundary cum > target.
func reached(cum, target float64, exclusive bool) bool {
	if exclusive {
		return cum > target
	}
	return cum >= target
}

// Name implements core.LogitsProcessor.
func (p *TopP) Name() string { return "top_p" }

// Process implements core.LogitsProcessor.
func (p *TopP) Process(_ *core.Sequence, c *core.Candidates) error {
	if p.p >= 1 {
		return nil
	}
	n := c.Len()
	if !c.IsDense() && !c.Sorted() && n <= smallSet {
		c.Sort()
	}
	if c.Sorted() {
		probs, _, err := c.Probs()
		if err != nil {
			return err
		}
		items := c.Items()
		var cum float64
		for i, q := range probs {
			if items[i].Logit == negInf { // the rest is banned too
				c.SetItems(items[:i], true)
				break
			}
			cum += float64(q)
			if reached(cum, p.p, p.exclusive) && i+1 >= p.minKeep {
				c.SetItems(items[:i+1], true)
				break
			}
		}
		return nil
	}
	logits := c.Logits()
	m, _, nan := fastmath.Max(logits)
	if nan || math.IsInf(float64(m), 0) {
		return logitsError(c)
	}
	e := c.ScratchFloats(n)
	total := fastmath.ExpShiftSum(e, logits, m)
	nucleus(c, e, p.p*total, p.minKeep, p.exclusive)
	return nil
}

// Top-p orders by probability, so its histogram (see keepByMass) can bucket the weights
// e = Exp(logit − max) ∈ [0, 1] themselves, by their float bits: bucket(e) = (bits(1) −
// bits(e)) >> 18, 32 buckets per octave of probability, the last one (1024) holding
// everything below 2^-32. Bucket order is then exactly descending e, the bucket costs two
// integer operations, and membership in the buckets before b is the comparison e > ePast(b),
// which fastmath.MaskAbove evaluates eight entries at a time.
const (
	oneBits     = 0x3f800000 // bits of float32(1)
	eBucketBits = 18
)

// maskChunk is how many entries one fastmath.MaskAbove call covers (a 512-byte mask).
const maskChunk = 4096

func eBucket(e float32) int {
	return min(int(oneBits-math.Float32bits(e))>>eBucketBits, histBuckets-1)
}

// ePast returns the largest e of bucket b's successors: bucket(e) < b ⇔ e > ePast(b), for
// 1 ≤ b ≤ histBuckets-1 (and every e ≤ 1).
func ePast(b int) float32 { return math.Float32frombits(uint32(oneBits - b<<eBucketBits)) }

// nucleus keeps the smallest set of entries of c that, in descending order of e (ties: the
// lower id), reaches target (see reached) and has at least minKeep entries. e holds the
// weights aligned with c (dense or sparse, unsorted). Banned entries are never kept from the
// boundary bucket; when the whole set is needed c is left unchanged.
func nucleus(c *core.Candidates, e []float32, target float64, minKeep int, exclusive bool) {
	var h massHist
	for _, v := range e {
		b := eBucket(v)
		h.count[b]++
		h.mass[b] += float64(v)
	}
	var cum float64
	before, bnd := 0, -1
	for b := range histBuckets {
		if reached(cum+h.mass[b], target, exclusive) && before+int(h.count[b]) >= minKeep {
			bnd = b
			break
		}
		cum += h.mass[b]
		before += int(h.count[b])
	}
	if bnd < 0 {
		return
	}
	// Entries above hi come before the boundary bucket; entries above lo and at most hi
	// are in it.
	hi, lo := float32(2), float32(-1)
	if bnd > 0 {
		hi = ePast(bnd)
	}
	if bnd < histBuckets-1 {
		lo = ePast(bnd + 1)
	}
	boundary := c.ScratchItems(int(h.count[bnd]))[:0] // ID: the entry's index; Logit: its e
	row := c.Dense()
	var items []core.Candidate
	if row != nil {
		items = c.Buffer(len(row))
	} else {
		items = c.Items()
	}
	// One pass over the entries above lo: keep those above hi at once on a dense row (into
	// the separate item buffer), set the boundary ones aside.
	w := 0
	var words [maskChunk / 64]uint64
	for base := 0; base < len(e); base += maskChunk {
		end := min(base+maskChunk, len(e))
		fastmath.MaskAbove(words[:], e[base:end], lo)
		for k, word := range words[:(end-base+63)/64] {
			for ; word != 0; word &= word - 1 {
				i := base + 64*k + bits.TrailingZeros64(word)
				v := e[i]
				switch {
				case v <= hi:
					if row == nil && items[i].Logit > negInf || row != nil && row[i] > negInf {
						boundary = append(boundary, core.Candidate{ID: core.TokenID(i), Logit: v})
					}
				case row != nil:
					items[w] = core.Candidate{ID: core.TokenID(i), Logit: row[i]}
					w++
				}
			}
		}
	}
	// The entry at index i: its id and logit.
	entry := func(i core.TokenID) core.Candidate {
		if row != nil {
			return core.Candidate{ID: i, Logit: row[i]}
		}
		return items[i]
	}
	// Descending e, then descending logit (entries more than ~87 below the maximum all have
	// e = 0 in the last bucket, yet min_keep must take them by logit), then ascending id.
	slices.SortFunc(boundary, func(x, y core.Candidate) int {
		switch {
		case x.Logit > y.Logit:
			return -1
		case x.Logit < y.Logit:
			return 1
		}
		ex, ey := entry(x.ID), entry(y.ID)
		switch {
		case ex.Logit > ey.Logit:
			return -1
		case ex.Logit < ey.Logit:
			return 1
		}
		return int(ex.ID) - int(ey.ID)
	})
	n := 0
	for n < len(boundary) && (!reached(cum, target, exclusive) || before+n < minKeep) {
		cum += float64(boundary[n].Logit)
		n++
	}
	if row != nil {
		for _, b := range boundary[:n] {
			items[w] = core.Candidate{ID: b.ID, Logit: row[b.ID]}
			w++
		}
		c.SetItems(items[:w], false)
		return
	}
	// A sparse set is compacted in place in a second pass: mark the chosen boundary entries
	// as above hi (+Inf), the others as dropped, and keep everything above hi.
	for k, b := range boundary {
		if k < n {
			e[b.ID] = float32(math.Inf(1))
		} else {
			e[b.ID] = 0
		}
	}
	for base := 0; base < len(e); base += maskChunk {
		end := min(base+maskChunk, len(e))
		fastmath.MaskAbove(words[:], e[base:end], hi)
		for k, word := range words[:(end-base+63)/64] {
			for ; word != 0; word &= word - 1 {
				items[w] = items[base+64*k+bits.TrailingZeros64(word)]
				w++
			}
		}
	}
	c.SetItems(items[:w], false)
}
