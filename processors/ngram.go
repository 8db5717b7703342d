package processors

import "github.com/loomlm/loom/core"

// NoRepeatNGram forbids repeating any n-gram: a token is banned (-Inf) when, appended to the
// sequence, it would complete an n-gram that already occurs in it, prompt included (as in
// Hugging Face transformers' no_repeat_ngram_size):
//
//	ban t ⇔ ∃ i : tokens[i : i+n−1] = tokens[L−n+1 : L] ∧ tokens[i+n−1] = t   (L = len(tokens))
//
// With n = 1 every token already in the sequence is banned. It scans the sequence once per
// step, O(L) with an early exit per position, and touches only the banned tokens of the row.
// It keeps no state, so it is safe for concurrent use.
type NoRepeatNGram struct {
	n int
}

// NewNoRepeatNGram returns the processor; n must be ≥ 1.
func NewNoRepeatNGram(n int) (*NoRepeatNGram, error) {
	if n < 1 {
		return nil, &core.ParamError{Param: "n", Value: n, Reason: "must be ≥ 1"}
	}
	return &NoRepeatNGram{n: n}, nil
}

// Name implements core.LogitsProcessor.
func (p *NoRepeatNGram) Name() string { return "no_repeat_ngram" }

// Process implements core.LogitsProcessor.
func (p *NoRepeatNGram) Process(seq *core.Sequence, c *core.Candidates) error {
	tokens, _ := tokensOf(seq)
	n, size := p.n, len(tokens)
	if size < n { // no complete n-gram yet (n = 1: an empty sequence)
		return nil
	}
	b := newBanner(c, size-n+1)
	prefix := tokens[size-n+1:] // the n−1 last tokens; empty when n = 1
	for i := 0; i+n <= size; i++ {
		match := true
		for j, t := range prefix {
			if tokens[i+j] != t {
				match = false
				break
			}
		}
		if match {
			b.ban(tokens[i+n-1])
		}
	}
	b.flush()
	return nil
}
