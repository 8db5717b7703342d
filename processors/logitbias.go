package processors

import (
	"fmt"
	"math"
	"slices"

	"github.com/loomlm/loom/core"
)

// LogitBias adds a fixed bias to the logits of chosen tokens: logit(i) += bias(i). A bias of
// -Inf bans the token. Only the listed tokens are touched: O(number of biases) on a dense
// row, O(items · log biases) on a sparse set (which is then marked unsorted; banned items are
// removed). NaN and ±Inf logits pass through.
type LogitBias struct {
	ids    []core.TokenID // ascending
	biases []float32
}

// NewLogitBias returns a logit-bias processor for a vocabulary of vocab tokens. Every id must
// lie in [0, vocab) and every bias be -Inf or within the float32 range (it is stored as float32
// and added to float32 logits).
func NewLogitBias(bias map[core.TokenID]float64, vocab int) (*LogitBias, error) {
	p := &LogitBias{}
	for id := range bias {
		p.ids = append(p.ids, id)
	}
	slices.Sort(p.ids)
	for _, id := range p.ids {
		v := bias[id]
		if id < 0 || int(id) >= vocab {
			return nil, &core.ParamError{Param: fmt.Sprintf("bias.%d", id), Reason: fmt.Sprintf("token id %d is outside the vocabulary [0, %d)", id, vocab)}
		}
		if !math.IsInf(v, -1) {
			if err := checkFloat(fmt.Sprintf("bias.%d", id), v, float32Range, `or "-inf" to ban`); err != nil {
				return nil, err
			}
		}
		p.biases = append(p.biases, float32(v))
	}
	return p, nil
}

// Name implements core.LogitsProcessor.
func (p *LogitBias) Name() string { return "logit_bias" }

// Process implements core.LogitsProcessor.
func (p *LogitBias) Process(_ *core.Sequence, c *core.Candidates) error {
	if len(p.ids) == 0 {
		return nil
	}
	if row := c.Dense(); row != nil {
		for i, id := range p.ids {
			if int(id) < len(row) {
				row[id] += p.biases[i]
			}
		}
		return nil
	}
	items := c.Items()
	w := 0
	changed := false
	for _, it := range items {
		if i, ok := slices.BinarySearch(p.ids, it.ID); ok {
			it.Logit += p.biases[i]
			changed = true
			if it.Logit == negInf {
				continue // banned: leave the set
			}
		}
		items[w] = it
		w++
	}
	c.SetItems(items[:w], c.Sorted() && !changed)
	return nil
}
