package processors

import (
	"math"

	"github.com/loomlm/loom/core"
)

// EpsilonCutoff is epsilon sampling (Hewitt et al. 2022, "Truncation Sampling as Language Model
// Desmoothing"), as Hugging Face transformers' EpsilonLogitsWarper (epsilon_cutoff): it removes
// the tokens whose probability is below a fixed ε, but never the minKeep most likely ones:
//
//	keep i ⇔ p(i) ≥ ε  ∨  rank(i) ≤ minKeep
//
// where rank orders by descending logit, equal logits by the lower id — the same min_keep rule
// as every loom filter, so when fewer than minKeep tokens reach ε exactly the minKeep largest
// logits are kept. transformers keeps every token tied with the minKeep-th as well; the two
// differ only on exactly equal logits. In logits the first condition is logit(i) ≥ log Z + ln ε.
// Cost: a maximum, an exponential pass for Z and one vectorised pass that collects the kept
// tokens; the result is sparse, sorted when the input was. NaN or +Inf logits and an all-banned
// set are errors.
type EpsilonCutoff struct {
	lnEps   float64
	minKeep int
}

// NewEpsilonCutoff returns the epsilon cutoff; epsilon must be in (0, 1) and minKeep ≥ 1.
func NewEpsilonCutoff(epsilon float64, minKeep int) (*EpsilonCutoff, error) {
	if err := checkFloat("epsilon", epsilon, openUnit, ""); err != nil {
		return nil, err
	}
	if err := checkMinKeep(minKeep); err != nil {
		return nil, err
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
	return cutWithMinKeep(c, logZ+p.lnEps, p.minKeep)
}

// EtaCutoff is eta sampling (Hewitt et al. 2022), as Hugging Face transformers' EtaLogitsWarper
// (eta_cutoff): epsilon sampling whose cutoff falls as the distribution's entropy H (nats)
// rises,
//
//	η = min(ε, √ε · e^(−H)),   keep i ⇔ p(i) ≥ η  ∨  rank(i) ≤ minKeep
//
// with rank as for EpsilonCutoff (ties by the lower id). The paper suggests ε between
// 3·10⁻⁴ and 4·10⁻³. Cost: EpsilonCutoff's plus one scalar pass for H. NaN or +Inf logits and an
// all-banned set are errors.
type EtaCutoff struct {
	eps     float64
	minKeep int
}

// NewEtaCutoff returns the eta cutoff; epsilon must be in (0, 1) and minKeep ≥ 1.
func NewEtaCutoff(epsilon float64, minKeep int) (*EtaCutoff, error) {
	if err := checkFloat("epsilon", epsilon, openUnit, ""); err != nil {
		return nil, err
	}
	if err := checkMinKeep(minKeep); err != nil {
		return nil, err
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
	return cutWithMinKeep(c, logZ+math.Log(eta), p.minKeep)
}

// cutWithMinKeep keeps the entries with logit ≥ thr (rounded up to a float32, so no entry
// below thr is kept); when fewer than minKeep qualify it keeps the minKeep largest logits
// instead, ties by the lower id (keepFrom).
func cutWithMinKeep(c *core.Candidates, thr float64, minKeep int) error {
	t := float32(thr)
	if float64(t) < thr {
		t = math.Nextafter32(t, float32(math.Inf(1)))
	}
	return keepFrom(c, t, minKeep)
}
