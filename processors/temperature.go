package processors

import (
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fastmath"
)

// Temperature rescales the logits: logit' = logit / t (a true division, as llama.cpp and
// transformers compute it), so that softmax(logit') ∝ p^(1/t). t < 1 sharpens the
// distribution, t > 1 flattens it, t = 1 leaves it unchanged.
//
// t = 0 means greedy: only the most likely token is kept (the lowest id among equal logits),
// so any strategy then picks it. NaN and +Inf logits are then an error, as is a row with every
// token banned; for t > 0 they pass through (-Inf stays banned). A very small t can overflow
// large logits to ±Inf, which the selection then reports.
//
// A sorted set stays sorted. Cost: one vectorised pass over a dense row, or over the kept
// items of a sparse set.
type Temperature struct {
	t float32
}

// minTemperature keeps t a normal float32 and 1/t finite.
const minTemperature = 1e-30

// NewTemperature returns a temperature processor; t must be 0 or in [1e-30, 3.4e38] (a normal
// float32 whose reciprocal is finite).
func NewTemperature(t float64) (*Temperature, error) {
	if t != 0 {
		if err := checkFloat("t", t, temperature32, "0 means greedy"); err != nil {
			return nil, err
		}
	}
	return &Temperature{t: float32(t)}, nil
}

// Name implements core.LogitsProcessor.
func (p *Temperature) Name() string { return "temperature" }

// Process implements core.LogitsProcessor.
func (p *Temperature) Process(_ *core.Sequence, c *core.Candidates) error {
	switch {
	case p.t == 1:
		return nil
	case p.t == 0:
		id, err := c.Argmax()
		if err != nil {
			return err
		}
		v, _ := c.Logit(id)
		keep := c.Buffer(1)
		keep[0] = core.Candidate{ID: id, Logit: v}
		c.SetItems(keep, true)
		return nil
	}
	if row := c.Dense(); row != nil {
		fastmath.Divide(row, p.t)
		return nil
	}
	items := c.Items()
	for i := range items {
		items[i].Logit /= p.t
	}
	return nil
}
