package processors

import (
	"math"

	"github.com/loomlm/loom/core"
)

// TopNSigma is top-nσ sampling (Tang et al. 2024, "Top-nσ: Not All Logits Are You Need"): it
// keeps the tokens whose logit is within n standard deviations of the largest,
//
//	keep i ⇔ logit(i) ≥ max_j logit(j) − n·σ,   σ² = (1/N) Σ_j (logit(j) − μ)²,  μ = (1/N) Σ_j logit(j)
//
// where the mean and the (population) standard deviation run over the N entries of the set
// that are not banned, as llama.cpp's top_n_sigma computes them. The most likely token is
// always kept. Dividing every logit by a temperature divides max, μ and σ alike, so the kept set
// does not depend on where temperature stands in the chain. n = 0 disables it (llama.cpp's
// disabled value is -1).
//
// It works on logits, without exponentials: one pass for the maximum, one for the moments (in
// float64, shifted by the maximum) and one vectorised pass to collect the kept tokens. The
// result is sparse, sorted when the input was. NaN or +Inf logits and an all-banned set are
// errors.
type TopNSigma struct {
	n float64
}

// NewTopNSigma returns a top-nσ processor; n must be a finite number ≥ 0.
func NewTopNSigma(n float64) (*TopNSigma, error) {
	if !(n >= 0) || math.IsInf(n, 1) {
		return nil, &core.ParamError{Param: "n", Value: n, Reason: "must be a finite number ≥ 0 (0 disables)"}
	}
	return &TopNSigma{n: n}, nil
}

// Name implements core.LogitsProcessor.
func (p *TopNSigma) Name() string { return "top_n_sigma" }

// Process implements core.LogitsProcessor.
func (p *TopNSigma) Process(_ *core.Sequence, c *core.Candidates) error {
	if p.n == 0 || c.Len() == 0 {
		return nil
	}
	logits := c.Logits()
	m, err := finiteMax(logits, c)
	if err != nil {
		return err
	}
	sigma := stdDev(logits, m)
	keepFrom(c, float32(float64(m)-p.n*sigma))
	return nil
}

// stdDev returns the population standard deviation of the logits above -Inf, m being their
// maximum. Moments are taken of logit − m so that large offsets cost no precision.
func stdDev(logits []float32, m float32) float64 {
	// Four independent accumulators keep the loop from waiting on one addition chain.
	var s1, s2 [4]float64
	var n [4]int
	i := 0
	for ; i+4 <= len(logits); i += 4 {
		for k := range 4 {
			if x := logits[i+k]; x > negInf {
				d := float64(x) - float64(m)
				s1[k] += d
				s2[k] += d * d
				n[k]++
			}
		}
	}
	for k := 0; i < len(logits); i, k = i+1, k+1 {
		if x := logits[i]; x > negInf {
			d := float64(x) - float64(m)
			s1[k] += d
			s2[k] += d * d
			n[k]++
		}
	}
	sum1 := s1[0] + s1[1] + s1[2] + s1[3]
	sum2 := s2[0] + s2[1] + s2[2] + s2[3]
	count := float64(n[0] + n[1] + n[2] + n[3])
	mean := sum1 / count
	return math.Sqrt(max(sum2/count-mean*mean, 0))
}
