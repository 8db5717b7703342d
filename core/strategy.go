package core

import "context"

// Strategy is the search itself: greedy, sampling, beam search, speculative decoding. It owns
// the loop because some strategies need several forwards per step, forks and rollbacks; the
// Session gives it the primitives. Decode returns when every output sequence has finished or
// on the first error.
type Strategy interface {
	Name() string
	Decode(ctx context.Context, s *Session) error
}

// StrategyFunc adapts a function to Strategy; its Name is "func".
type StrategyFunc func(ctx context.Context, s *Session) error

// Name implements Strategy.
func (f StrategyFunc) Name() string { return "func" }

// Decode implements Strategy.
func (f StrategyFunc) Decode(ctx context.Context, s *Session) error { return f(ctx, s) }
