// Package strategies holds loom's built-in decoding strategies: greedy and ancestral sampling
// here, beam search and speculative decoding beside them.
package strategies

import (
	"context"
	"math"

	"github.com/loomlm/loom/core"
)

// Greedy picks the most likely token after processing at every step (argmax). Ties go to the
// lowest token id. With n > 1 every sequence is the same; greedy runs them anyway, batched.
type Greedy struct{}

// Name implements core.Strategy.
func (Greedy) Name() string { return "greedy" }

// Decode implements core.Strategy.
func (Greedy) Decode(ctx context.Context, s *core.Session) error {
	return loop(s, s.Greedy)
}

// Ancestral samples every token from the processed distribution with the sequence's own random
// stream (multinomial sampling). A temperature of 0 in the chain makes it greedy.
type Ancestral struct{}

// Name implements core.Strategy.
func (Ancestral) Name() string { return "sample" }

// Decode implements core.Strategy.
func (Ancestral) Decode(ctx context.Context, s *core.Session) error {
	return loop(s, s.Sample)
}

// loop is the one-token-per-step loop shared by greedy and sampling: the request's n sequences
// share the prompt's prefill, and each step forwards all live sequences in one batch.
func loop(s *core.Session, pick func(*core.Sequence, *core.Candidates) (core.Choice, error)) error {
	seqs, err := s.Start(s.Request().N)
	if err != nil {
		return err
	}
	live := core.Live(nil, seqs)
	for len(live) > 0 {
		cands, err := s.ProcessBatch(live)
		if err != nil {
			return err
		}
		for i, q := range live {
			ch, err := pick(q, cands[i])
			if err != nil {
				return err
			}
			if err := s.Append(q, ch); err != nil {
				return err
			}
		}
		live = core.Live(live, live)
		if err := s.Forward(live...); err != nil {
			return err
		}
	}
	return nil
}

func logOf(p float32) float32 {
	if p <= 0 {
		return float32(math.Inf(-1))
	}
	return float32(math.Log(float64(p)))
}
