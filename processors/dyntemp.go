package processors

import (
	"fmt"
	"math"

	"github.com/loomlm/loom/core"
)

// DynamicTemperature is entropy-scaled temperature ("dynatemp", as llama.cpp's temp_ext
// sampler): each step it picks a temperature between T − δ and T + δ from how uncertain the
// distribution is, then divides the logits by it like Temperature:
//
//	H = −Σ p(i) ln p(i),   Ĥ = H / ln N,   T' = T_lo + (T_hi − T_lo) · Ĥ^exponent
//	T_lo = max(0, T − δ),  T_hi = T + δ,   logit' = logit / T'
//
// N is the number of tokens still possible (not banned), so Ĥ = 1 for a uniform distribution
// over them, however earlier processors represented their cuts. llama.cpp counts the entries
// of its candidate array instead: the same after its truncating samplers, which shrink the
// array, but it also counts tokens a logit bias set to -Inf. A confident step (low entropy)
// gets a low temperature, an uncertain one a high temperature; exponent > 1 keeps the
// temperature low until the entropy is high. T' = 0 keeps only the most likely token (greedy),
// as Temperature does. With δ = 0 it is plain Temperature(T); a set of one entry is left
// unchanged, as llama.cpp leaves it, and with one possible token Ĥ = 0.
// text-generation-webui's dynatemp_low and dynatemp_high are T − δ and T + δ.
//
// Cost: a maximum, an exponential pass and an entropy pass, then the division (vectorised on a
// dense row). NaN or +Inf logits and an all-banned set are errors when δ > 0.
type DynamicTemperature struct {
	t, delta, exponent float64
	plain              Temperature
}

// NewDynamicTemperature returns the processor: t as for NewTemperature, delta in [0, 3.4e38]
// with t + delta within the float32 range (the step's temperature divides float32 logits),
// exponent any finite number ≥ 0.
func NewDynamicTemperature(t, delta, exponent float64) (*DynamicTemperature, error) {
	plain, err := NewTemperature(t)
	if err != nil {
		return nil, err
	}
	if err := checkFloat("delta", delta, nonNegative32, "0: plain temperature"); err != nil {
		return nil, err
	}
	// The step's temperature reaches t + delta, which the logits are divided by in float32.
	if t+delta > maxFloat32 {
		return nil, &core.ParamError{Param: "delta", Value: delta, Reason: fmt.Sprintf("t + delta = %g exceeds the float32 range (3.4028235e+38)", t+delta)}
	}
	// Ĥ ∈ [0, 1] is raised to the exponent in float64: any finite exponent ≥ 0 is safe.
	if err := checkFloat("exponent", exponent, nonNegativeAny, ""); err != nil {
		return nil, err
	}
	return &DynamicTemperature{t: t, delta: delta, exponent: exponent, plain: *plain}, nil
}

// Name implements core.LogitsProcessor.
func (p *DynamicTemperature) Name() string { return "dynamic_temperature" }

// Process implements core.LogitsProcessor.
func (p *DynamicTemperature) Process(seq *core.Sequence, c *core.Candidates) error {
	if p.delta == 0 {
		return p.plain.Process(seq, c)
	}
	n := c.Len()
	if n <= 1 {
		return nil
	}
	logits := c.Logits()
	m, err := finiteMax(logits, c)
	if err != nil {
		return err
	}
	_, e, s := logNormaliser(c, logits, m)
	t := p.temperature(entropy(logits, e, m, s))
	if t < minTemperature {
		t = 0
	}
	tp := Temperature{t: float32(t)}
	return tp.Process(seq, c)
}

// temperature maps the entropy h (nats) of a set with n possible tokens to the step's
// temperature; with one possible token the normalised entropy is 0.
func (p *DynamicTemperature) temperature(h float64, n int) float64 {
	lo, hi := math.Max(0, p.t-p.delta), p.t+p.delta
	norm := 0.0
	if n > 1 {
		norm = math.Min(math.Max(h/math.Log(float64(n)), 0), 1)
	}
	return lo + (hi-lo)*math.Pow(norm, p.exponent)
}
