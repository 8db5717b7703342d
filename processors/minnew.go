package processors

import (
	"fmt"
	"slices"

	"github.com/loomlm/loom/core"
)

// MinNewTokens keeps a sequence from ending too early: while fewer than n tokens have been
// generated, the end-of-sequence tokens it is given are banned (-Inf):
//
//	logit(e) = -Inf for every e in eos   while generated < n
//
// The pipeline gives the tokenizer's end-of-generation tokens (EOS, EOT, … —
// core.SpecialTokens.EndOfGeneration) unless eos_token_ids lists others, as transformers'
// MinNewTokensLengthLogitsProcessor takes eos_token_id. n = 0 disables it. It touches only
// those tokens.
type MinNewTokens struct {
	n   int
	eog []core.TokenID
}

// NewMinNewTokens returns the processor; n must be ≥ 0 and every id of eos in [0, vocab) when
// vocab > 0 (vocab ≤ 0: the vocabulary is not known, only negative ids are refused). An empty
// eos bans nothing.
func NewMinNewTokens(n int, eos []core.TokenID, vocab int) (*MinNewTokens, error) {
	if n < 0 {
		return nil, &core.ParamError{Param: "n", Value: n, Reason: "must be ≥ 0 (0 disables)"}
	}
	for i, id := range eos {
		if id < 0 || vocab > 0 && int(id) >= vocab {
			bound := "must be ≥ 0"
			if vocab > 0 {
				bound = fmt.Sprintf("outside the vocabulary [0, %d)", vocab)
			}
			return nil, &core.ParamError{Param: fmt.Sprintf("eos_token_ids[%d]", i), Value: id, Reason: bound}
		}
	}
	return &MinNewTokens{n: n, eog: slices.Clone(eos)}, nil
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
