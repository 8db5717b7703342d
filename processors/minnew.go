package processors

import (
	"slices"

	"github.com/loomlm/loom/core"
)

// MinNewTokens keeps a sequence from ending too early: while fewer than n tokens have been
// generated, the end-of-generation tokens (EOS, EOT, … — core.SpecialTokens.EndOfGeneration)
// are banned (-Inf). n = 0 disables it. It touches only those tokens.
type MinNewTokens struct {
	n   int
	eog []core.TokenID
}

// NewMinNewTokens returns the processor; n must be ≥ 0, eog lists the end-of-generation ids.
func NewMinNewTokens(n int, eog []core.TokenID) (*MinNewTokens, error) {
	if n < 0 {
		return nil, &core.ParamError{Param: "n", Value: n, Reason: "must be ≥ 0 (0 disables)"}
	}
	return &MinNewTokens{n: n, eog: slices.Clone(eog)}, nil
}

// Name implements core.LogitsProcessor.
func (p *MinNewTokens) Name() string { return "min_new_tokens" }

// Process implements core.LogitsProcessor.
func (p *MinNewTokens) Process(seq *core.Sequence, c *core.Candidates) error {
	generated := 0
	if seq != nil {
		generated = seq.NumGenerated()
	}
	if generated >= p.n || len(p.eog) == 0 {
		return nil
	}
	b := newBanner(c, len(p.eog))
	for _, id := range p.eog {
		b.ban(id)
	}
	b.flush()
	return nil
}
