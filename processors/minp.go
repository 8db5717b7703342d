package processors

import (
	"math"

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
	if err := checkFloat("p", p, unitInterval, "0 disables"); err != nil {
		return nil, err
	}
	if err := checkMinKeep(minKeep); err != nil {
		return nil, err
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
	var m float32
	if c.Sorted() {
		items := c.Items()
		if len(items) == 0 {
			return core.ErrNoCandidates
		}
		m = items[0].Logit
	} else {
		var nan bool
		m, _, nan = fastmath.Max(c.Logits())
		if nan {
			return logitsError(c)
		}
	}
	if m != m || math.IsInf(float64(m), 0) {
		return logitsError(c)
	}
	// p(i) ≥ p · p_max ⇔ logit(i) ≥ max + ln p.
	return keepFrom(c, m+p.lnP, p.minKeep)
}
