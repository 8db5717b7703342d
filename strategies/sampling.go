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
type Greedy struct {
	// ForceTokens appends a token that a processor says is the only one possible (a grammar
	// with a single continuation, see core.Session.Forced) without waiting for the model's
	// step: the model then runs it together with the next token, one forward fewer.
	ForceTokens bool
}

// Name implements core.Strategy.
func (Greedy) Name() string { return "greedy" }

// Decode implements core.Strategy.
func (g Greedy) Decode(ctx context.Context, s *core.Session) error {
	return loop(s, s.Greedy, nil, g.ForceTokens)
}

// Ancestral samples every token from the processed distribution with the sequence's own random
// stream (multinomial sampling). A temperature of 0 in the chain makes it greedy.
type Ancestral struct {
	// ForceTokens: as Greedy's.
	ForceTokens bool
}

// Name implements core.Strategy.
func (Ancestral) Name() string { return "sample" }

// Decode implements core.Strategy.
func (a Ancestral) Decode(ctx context.Context, s *core.Session) error {
	return loop(s, s.Sample, s.SkipDraw, a.ForceTokens)
}

// loop is the one-token-per-step loop shared by greedy and sampling: the request's n sequences
// share the prompt's prefill, and each step forwards all live sequences in one batch. With
// force, the tokens a processor forces after a chosen one are appended before the forward,
// which then runs them all; skip (if not nil) is called for each, to keep a random stream
// where picking the forced token would have left it.
func loop(s *core.Session, pick func(*core.Sequence, *core.Candidates) (core.Choice, error), skip func(*core.Sequence), force bool) error {
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
			for force {
				id, ok := s.Forced(q)
				if !ok {
					break
				}
				if skip != nil {
					skip(q)
				}
				if err := s.Append(q, core.Choice{ID: id}); err != nil {
					return err
				}
				s.Stats().ForcedTokens++
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
