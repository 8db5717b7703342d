package processors

import (
	"math"

	"github.com/loomlm/loom/core"
)

// EpsilonCutoff is epsilon sampling (Hewitt et al. 2022, "Truncation Sampling as Language Model
// Desmoothing"), as Hugging Face transformers' EpsilonLogitsWarper (epsilon_cutoff): it removes
// the tokens whose probability is below a fixed ε, but never the minKeep most likely ones:
//
//	keep i ⇔ p(i) ≥ ε  ∨  logit(i) ≥ L_k,   L_k = the minKeep-th largest logit
//
// so tokens tied with the minKeep-th are kept too, as transformers keeps them. In logits the
// first condition is logit(i) ≥ log Z + ln ε, so the cut is one threshold, min(log Z + ln ε,
// L_k). Cost: a maximum, an exponential pass for Z and one vectorised pass that collects the
// kept tokens; the result is sparse, sorted when the input was. NaN or +Inf logits and an
// all-banned set are errors.
type EpsilonCutoff struct {
	lnEps   float64
	minKeep int
}

// NewEpsilonCutoff returns the epsilon cutoff; epsilon must be in (0, 1) and minKeep ≥ 1.
func NewEpsilonCutoff(epsilon float64, minKeep int) (*EpsilonCutoff, error) {
	if !(epsilon > 0 && epsilon < 1) {
		return nil, &core.ParamError{Param: "epsilon", Value: epsilon, Reason: "must be in (0, 1)"}
	}
	if minKeep < 1 {
		return nil, &core.ParamError{Param: "min_keep", Value: minKeep, Reason: "must be ≥ 1"}
	}
	return &EpsilonCutoff{lnEps: math.Log(epsilon), minKeep: minKeep}, nil
}

// Name implements core.LogitsProcessor.
func (p *EpsilonCutoff) Name() string { return "epsilon_cutoff" }

// Process implements core.LogitsProcessor.
func (p *EpsilonCutoff) Process(_ *core.Sequence, c *core.Candidates) error {
	if c.Len() == 0 {
		return core.ErrNoCandidates
	}
	logits := c.Logits()
	m, err := finiteMax(logits, c)
	if err != nil {
		return err
	}
	logZ, _, _ := logNormaliser(c, logits, m)
	return cutWithMinKeep(c, m, logZ+p.lnEps, p.minKeep)
}

// EtaCutoff is eta sampling (Hewitt et al. 2022), as Hugging Face transformers' EtaLogitsWarper
// (eta_cutoff): epsilon sampling whose cutoff falls as the distribution's entropy H (nats)
// rises,
//
//	η = min(ε, √ε · e^(−H)),   keep i ⇔ p(i) ≥ η  ∨  logit(i) ≥ L_k
//
// with L_k the minKeep-th largest logit, as for EpsilonCutoff. The paper suggests ε between
// 3·10⁻⁴ and 4·10⁻³. Cost: EpsilonCutoff's plus one scalar pass for H. NaN or +Inf logits and an
// all-banned set are errors.
type EtaCutoff struct {
	eps     float64
	minKeep int
}

// NewEtaCutoff returns the eta cutoff; epsilon must be in (0, 1) and minKeep ≥ 1.
func NewEtaCutoff(epsilon float64, minKeep int) (*EtaCutoff, error) {
	if !(epsilon > 0 && epsilon < 1) {
		return nil, &core.ParamError{Param: "epsilon", Value: epsilon, Reason: "must be in (0, 1)"}
	}
	if minKeep < 1 {
		return nil, &core.ParamError{Param: "min_keep", Value: minKeep, Reason: "must be ≥ 1"}
	}
	return &EtaCutoff{eps: epsilon, minKeep: minKeep}, nil
}

// Name implements core.LogitsProcessor.
func (p *EtaCutoff) Name() string { return "eta_cutoff" }

// Process implements core.LogitsProcessor.
func (p *EtaCutoff) Process(_ *core.Sequence, c *core.Candidates) error {
	if c.Len() == 0 {
		return core.ErrNoCandidates
	}
	logits := c.Logits()
	m, err := finiteMax(logits, c)
	if err != nil {
		return err
	}
	logZ, e, s := logNormaliser(c, logits, m)
	h, _ := entropy(logits, e, m, s)
	eta := math.Min(p.eps, math.Sqrt(p.eps)*math.Exp(-h))
	return cutWithMinKeep(c, m, logZ+math.Log(eta), p.minKeep)
}

// cutWithMinKeep keeps the entries with logit ≥ min(thr, L_k), L_k being the minKeep-th largest
// logit (m, the largest, when minKeep is 1).
func cutWithMinKeep(c *core.Candidates, m float32, thr float64, minKeep int) error {
	t := float32(thr)
	if thr > float64(m) {
		t = m
	}
	if minKeep > 1 {
		top := topItems(c, minKeep)
		if kth := top[len(top)-1].Logit; len(top) < minKeep {
			t = negInf // fewer tokens than minKeep: keep every one not banned
		} else if kth < t {
			t = kth
		}
	}
	return keepFrom(c, t, 0)
}
