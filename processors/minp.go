package processors

import (
	"math"
	"math/bits"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fastmath"
)

// MinP keeps the tokens whose probability is at least p times that of the most likely token
// (Nguyen et al. 2024), and never fewer than minKeep (the most likely ones):
//
//	keep i ⇔ p(i) ≥ p · max_j p(j) ⇔ logit(i) ≥ max_j logit(j) + ln p
//
// It works on logits, so no exponential is computed: on a dense row one pass finds the
// maximum and one vectorised pass (fastmath.MaskAbove) collects the tokens above the
// threshold; on a sorted set it cuts the prefix. p = 0 disables it; p = 1 keeps the most likely token(s) only. NaN or
// +Inf logits and an all-banned set are errors.
type MinP struct {
	p       float64
	lnP     float32
	minKeep int
}

// NewMinP returns a min-p processor; p must be in [0, 1] and minKeep ≥ 1.
func NewMinP(p float64, minKeep int) (*MinP, error) {
	if !(p >= 0 && p <= 1) {
		return nil, &core.ParamError{Param: "p", Value: p, Reason: "must be in [0, 1]"}
	}
	if minKeep < 1 {
		return nil, &core.ParamError{Param: "min_keep", Value: minKeep, Reason: "must be ≥ 1"}
	}
	return &MinP{p: p, lnP: float32(math.Log(p)), minKeep: minKeep}, nil
}

// Name implements core.LogitsProcessor.
func (p *MinP) Name() string { return "min_p" }

// Process implements core.LogitsProcessor.
func (p *MinP) Process(_ *core.Sequence, c *core.Candidates) error {
	if p.p == 0 {
		return nil
	}
	if c.Sorted() {
		items := c.Items()
		if len(items) == 0 {
			return core.ErrNoCandidates
		}
		m := items[0].Logit
		if m != m || math.IsInf(float64(m), 0) {
			return logitsError(c)
		}
		thr := m + p.lnP
		cut := len(items)
		for i, it := range items {
			if !(it.Logit >= thr) {
				cut = i
				break
			}
		}
		if cut < p.minKeep {
			return c.TopK(p.minKeep)
		}
		c.SetItems(items[:cut], true)
		return nil
	}
	logits := c.Logits()
	m, _, nan := fastmath.Max(logits)
	if nan || math.IsInf(float64(m), 0) {
		return logitsError(c)
	}
	// logit ≥ thr ⇔ logit > the float just below thr.
	below := math.Nextafter32(m+p.lnP, negInf)
	if row := c.Dense(); row != nil {
		out := c.Buffer(len(row))
		w := 0
		var words [maskChunk / 64]uint64
		for base := 0; base < len(row); base += maskChunk {
			end := min(base+maskChunk, len(row))
			fastmath.MaskAbove(words[:], row[base:end], below)
			for k, word := range words[:(end-base+63)/64] {
				for ; word != 0; word &= word - 1 {
					i := base + 64*k + bits.TrailingZeros64(word)
					out[w] = core.Candidate{ID: core.TokenID(i), Logit: row[i]}
					w++
				}
			}
		}
		if w < p.minKeep {
			return c.TopK(p.minKeep)
		}
		c.SetItems(out[:w], false)
		return nil
	}
	items := c.Items()
	n := 0
	for _, it := range items {
		if it.Logit > below {
			n++
		}
	}
	if n < p.minKeep {
		return c.TopK(p.minKeep)
	}
	w := 0
	for _, it := range items {
		if it.Logit > below {
			items[w] = it
			w++
		}
	}
	c.SetItems(items[:w], false)
	return nil
}
