package processors

import "github.com/loomlm/loom/core"

// TopK keeps the k tokens with the largest logits (equivalently, the k most probable; among
// equal logits the lower ids) and removes the rest, never keeping fewer than minKeep:
//
//	keep i ⇔ rank(i) ≤ max(k, minKeep)
//
// (rank by descending logit, equal logits by the lower id), so p'(i) ∝ p(i) for the kept
// tokens and 0 for the others. minKeep (default 1) matters when k is set lower than a
// min_tokens_to_keep carried over from another engine: transformers' TopKLogitsWarper keeps
// max(top_k, min_tokens_to_keep) the same way. k = 0 disables it whatever minKeep; a k at
// least the size of the set keeps everything. Banned (-Inf) tokens are never kept.
//
// It selects with a heap of k entries in one pass over the row, skipping the values that
// cannot enter it eight at a time (see core.Candidates.TopK), and leaves a sparse set sorted
// by descending logit, so the filters after it work on k items and need not sort. A NaN logit
// met during the pass is an error, and so is a set with nothing to keep.
type TopK struct {
	k int
}

// NewTopK returns a top-k processor with minKeep = 1; k must be ≥ 0.
func NewTopK(k int) (*TopK, error) {
	return NewTopKMinKeep(k, 1)
}

// NewTopKMinKeep returns a top-k processor that keeps max(k, minKeep) tokens when k > 0; k
// must be ≥ 0 and minKeep ≥ 1.
func NewTopKMinKeep(k, minKeep int) (*TopK, error) {
	if k < 0 {
		return nil, &core.ParamError{Param: "k", Value: k, Reason: "must be ≥ 0 (0 disables)"}
	}
	if err := checkMinKeep(minKeep); err != nil {
		return nil, err
	}
	if k > 0 {
		k = max(k, minKeep)
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
