package processors

import (
	"math"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fastmath"
)

// TypicalP is locally typical sampling (Meister et al. 2022, as in Hugging Face transformers):
// it orders tokens by how far their information content is from the distribution's entropy,
//
//	H = −Σ_j p(j) log p(j),   d(i) = | −log p(i) − H |,
//
// ascending (equal distances: the lower id first), and keeps the shortest prefix whose
// cumulative probability reaches p — the crossing token kept — and never fewer than minKeep.
// transformers also keeps tokens tied with the crossing one; here ties go by id, like top-p.
// p = 1 disables it.
//
// d(i) = |c − logit(i)| with c = log Z − H, so the selection is the same histogram method as
// top-p's (see keepByMass), without sorting the vocabulary; one more pass computes H. The
// result is sparse and unsorted. NaN or +Inf logits and an all-banned set are errors.
type TypicalP struct {
	p       float64
	minKeep int
}

// NewTypicalP returns a typical-p processor; p must be in (0, 1] and minKeep ≥ 1.
func NewTypicalP(p float64, minKeep int) (*TypicalP, error) {
	if err := checkFloat("p", p, halfOpenUnit, "1 disables"); err != nil {
		return nil, err
	}
	if err := checkMinKeep(minKeep); err != nil {
		return nil, err
	}
	return &TypicalP{p: p, minKeep: minKeep}, nil
}

// Name implements core.LogitsProcessor.
func (p *TypicalP) Name() string { return "typical_p" }

// Process implements core.LogitsProcessor.
func (p *TypicalP) Process(_ *core.Sequence, c *core.Candidates) error {
	if p.p >= 1 {
		return nil
	}
	logits := c.Logits()
	m, _, nan := fastmath.Max(logits)
	if nan || math.IsInf(float64(m), 0) {
		return logitsError(c)
	}
	e := c.ScratchFloats(len(logits))
	sum := fastmath.ExpShiftSum(e, logits, m)
	// With log p(i) = logit(i) − m − ln S:  H = ln S − (1/S) Σ e(i)·(logit(i) − m).
	var acc float64
	for i, x := range logits {
		if e[i] > 0 {
			acc += float64(e[i]) * float64(x-m)
		}
	}
	lnS := math.Log(sum)
	h := lnS - acc/sum
	center := float32(float64(m) + lnS - h)
	keepByMass(c, logits, e, center, m, p.p*sum, p.minKeep)
	return nil
}
