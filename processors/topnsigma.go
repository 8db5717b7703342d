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

// NewTopNSigma returns a top-nσ processor; n must be in [0, 3.4e38] (n·σ is subtracted from a
// float32 logit).
func NewTopNSigma(n float64) (*TopNSigma, error) {
	if err := checkFloat("n", n, nonNegative32, "0 disables"); err != nil {
		return nil, err
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
	return keepFrom(c, float32(float64(m)-p.n*sigma), 0)
}

// stdDev returns the population standard deviation of the logits above -Inf, m being their
// maximum. Moments are taken of logit − m, so large offsets cost no precision; blocks of 256 are
// summed in float32 over four independent lanes (no lane waits on another's additions) and the
// block sums in float64.
func stdDev(logits []float32, m float32) float64 {
	var sum1, sum2 float64
	count := 0
	for base := 0; base < len(logits); base += 256 {
		block := logits[base:min(base+256, len(logits))]
		var a1, b1, c1, d1, a2, b2, c2, d2 float32
		i := 0
		for ; i+4 <= len(block); i += 4 {
			x0, x1, x2, x3 := block[i], block[i+1], block[i+2], block[i+3]
			if x0 > negInf && x1 > negInf && x2 > negInf && x3 > negInf {
				e0, e1, e2, e3 := x0-m, x1-m, x2-m, x3-m
				a1, b1, c1, d1 = a1+e0, b1+e1, c1+e2, d1+e3
				a2, b2, c2, d2 = a2+e0*e0, b2+e1*e1, c2+e2*e2, d2+e3*e3
				count += 4
				continue
			}
			for _, x := range block[i : i+4] {
				if x > negInf {
					e := x - m
					a1 += e
					a2 += e * e
					count++
				}
			}
		}
		for _, x := range block[i:] {
			if x > negInf {
				e := x - m
				a1 += e
				a2 += e * e
				count++
			}
		}
		sum1 += float64(a1) + float64(b1) + float64(c1) + float64(d1)
		sum2 += float64(a2) + float64(b2) + float64(c2) + float64(d2)
	}
	mean := sum1 / float64(count)
	return math.Sqrt(max(sum2/float64(count)-mean*mean, 0))
}
