package server

import (
	"cmp"
	"slices"

	"github.com/loomlm/loom/core"
)

// best returns the n sequences of seqs with the highest mean raw log-probability per token
// (completions' best_of), best first and numbered from 0; ties keep their order.
func best(seqs []core.SequenceResult, n int) []core.SequenceResult {
	mean := func(sq core.SequenceResult) float64 {
		if len(sq.Logprobs) == 0 {
			return 0
		}
		var sum float64
		for _, v := range sq.Logprobs {
			sum += float64(v)
		}
		return sum / float64(len(sq.Logprobs))
	}
	out := slices.Clone(seqs)
	slices.SortStableFunc(out, func(a, b core.SequenceResult) int { return cmp.Compare(mean(b), mean(a)) })
	out = out[:min(n, len(out))]
	for i := range out {
		out[i].Index = i
	}
	return out
}
