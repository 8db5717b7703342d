package processors

import "github.com/loomlm/loom/core"

// TopK keeps the k tokens with the largest logits (equivalently, the k most probable; among
// equal logits the lower ids) and removes the rest: p'(i) ∝ p(i) if i is among the top k,
// else 0. k = 0 disables it; a k at least the size of the set keeps everything. Banned (-Inf)
// tokens are never kept.
//
// It selects with a heap of k entries in one pass over the row, skipping the values that
// cannot enter it eight at a time (see core.Candidates.TopK), and leaves a sparse set sorted
// by descending logit, so the filters after it work on k items and need not sort. A NaN logit
// met during the pass is an error, and so is a set with nothing to keep.
type TopK struct {
	k int
}

// NewTopK returns a top-k processor; k must be ≥ 0.
func NewTopK(k int) (*TopK, error) {
	if k < 0 {
		return nil, &core.ParamError{Param: "k", Value: k, Reason: "must be ≥ 0 (0 disables)"}
	}
	return &TopK{k: k}, nil
}

// Name implements core.LogitsProcessor.
func (p *TopK) Name() string { return "top_k" }

// Process implements core.LogitsProcessor.
func (p *TopK) Process(_ *core.Sequence, c *core.Candidates) error {
	if p.k == 0 {
		return nil
	}
	return c.TopK(p.k)
}
