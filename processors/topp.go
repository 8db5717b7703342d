package processors

import (
	"math"

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
// and renormalises over the kept tokens (p'(i) ∝ p(i)). p = 1 disables it.
//
// On a sorted set (after top-k) it walks the prefix, O(kept). On a dense row it never sorts
// the vocabulary: a histogram of the probabilities, by distance below the maximum logit,
// locates the cut and only the tokens in the boundary bucket are sorted (see keepByMass);
// about four vectorised or scalar passes over the row in all. The result is then sparse and
// in id order, not sorted. NaN or +Inf logits and an all-banned set are errors.
type TopP struct {
	p       float64
	minKeep int
}

// NewTopP returns a top-p processor; p must be in (0, 1] and minKeep ≥ 1.
func NewTopP(p float64, minKeep int) (*TopP, error) {
	if !(p > 0 && p <= 1) {
		return nil, &core.ParamError{Param: "p", Value: p, Reason: "must be in (0, 1]"}
	}
	if minKeep < 1 {
		return nil, &core.ParamError{Param: "min_keep", Value: minKeep, Reason: "must be ≥ 1"}
	}
	return &TopP{p: p, minKeep: minKeep}, nil
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
		var cum float64
		for i, q := range probs {
			cum += float64(q)
			if cum >= p.p && i+1 >= p.minKeep {
				c.SetItems(c.Items()[:i+1], true)
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
	keepByMass(c, logits, e, m, m, p.p*total, p.minKeep)
	return nil
}
