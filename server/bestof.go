package server

import (
	"cmp"
	"slices"

	"github.com/loomlm/loom/core"
)

// best returns the n sequences of seqs with the highest mean raw log-probability per token
// (completions' best_of), best first; ties keep their order.
func best(seqs []core.SequenceResult, n int) []core.SequenceResult {
	type ranked struct {
		sq   core.SequenceResult
		mean float64
	}
	rs := make([]ranked, len(seqs))
	for i, sq := range seqs {
		rs[i].sq = sq
		for _, v := range sq.Logprobs {
			rs[i].mean += float64(v)
		}
		if len(sq.Logprobs) > 0 {
			rs[i].mean /= float64(len(sq.Logprobs))
		}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int { return cmp.Compare(b.mean, a.mean) })
	out := make([]core.SequenceResult, min(n, len(rs)))
	for i := range out {
		out[i] = rs[i].sq
	}
	return out
}
