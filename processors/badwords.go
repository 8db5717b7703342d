package processors

import (
	"fmt"
	"slices"

	"github.com/loomlm/loom/core"
)

// BadWords bans token sequences: for every banned sequence s = (s₁ … s_m), the token s_m is
// banned (-Inf) at a step when the sequence so far (prompt included) ends with s₁ … s_{m−1}. A
// one-token sequence is therefore always banned. This is Hugging Face transformers'
// bad_words_ids; words given as text are turned into sequences by BadWordSequences.
//
// Exempt tokens are never banned on their own: a one-token sequence of an exempt token is
// dropped at construction, as transformers drops [eos_token_id] from bad_words_ids. The
// pipeline exempts the tokenizer's end-of-generation tokens by default (exempt_eos = true), so
// a list carried over from elsewhere cannot keep a model from ever ending; exempt_eos = false
// bans them like any other token. A longer sequence ending in an exempt token still bans it
// after its prefix (so does transformers): that is a deliberate "do not end after …".
//
// A step costs O(total length of the banned sequences) and touches only the banned tokens.
// It keeps no state, so it is safe for concurrent use.
type BadWords struct {
	single []core.TokenID   // always banned
	multi  [][]core.TokenID // length ≥ 2
}

// NewBadWords returns the processor for the given sequences over a vocabulary of vocab tokens.
// Every sequence must be non-empty with ids in [0, vocab). Duplicates are dropped, and so are
// the one-token sequences of an exempt token (exempt nil: none).
func NewBadWords(seqs [][]core.TokenID, vocab int, exempt []core.TokenID) (*BadWords, error) {
	p := &BadWords{}
	for i, s := range seqs {
		if len(s) == 0 {
			return nil, &core.ParamError{Param: fmt.Sprintf("ids[%d]", i), Reason: "is empty: give at least one token id"}
		}
		for j, id := range s {
			if id < 0 || int(id) >= vocab {
				return nil, &core.ParamError{Param: fmt.Sprintf("ids[%d][%d]", i, j), Value: id, Reason: fmt.Sprintf("outside the vocabulary [0, %d)", vocab)}
			}
		}
		switch {
		case len(s) == 1 && slices.Contains(exempt, s[0]):
			// never banned on its own
		case len(s) == 1 && !slices.Contains(p.single, s[0]):
			p.single = append(p.single, s[0])
		case len(s) > 1 && !slices.ContainsFunc(p.multi, func(t []core.TokenID) bool { return slices.Equal(s, t) }):
			p.multi = append(p.multi, slices.Clone(s))
		}
	}
	return p, nil
}

// BadWordSequences encodes words into the token sequences to ban: each word as written and
// with a leading space (tokenizers encode a word differently at the start of a text and after
// a space), without special tokens, duplicates dropped. A word that encodes to no tokens is an
// error naming it (its Param is "words[i]").
func BadWordSequences(tok core.Tokenizer, words []string) ([][]core.TokenID, error) {
	var out [][]core.TokenID
	for i, w := range words {
		for _, text := range []string{w, " " + w} {
			ids, err := tok.Encode(text, core.EncodeOptions{})
			if err != nil {
				return nil, &core.ParamError{Param: fmt.Sprintf("words[%d]", i), Value: w, Reason: "cannot be encoded: " + err.Error()}
			}
			if len(ids) == 0 {
				return nil, &core.ParamError{Param: fmt.Sprintf("words[%d]", i), Value: w, Reason: "encodes to no tokens"}
			}
			if !slices.ContainsFunc(out, func(s []core.TokenID) bool { return slices.Equal(s, ids) }) {
				out = append(out, ids)
			}
		}
	}
	return out, nil
}

// Name implements core.LogitsProcessor.
func (p *BadWords) Name() string { return "bad_words" }

// Process implements core.LogitsProcessor.
func (p *BadWords) Process(seq *core.Sequence, c *core.Candidates) error {
	if len(p.single) == 0 && len(p.multi) == 0 {
		return nil
	}
	tokens, _ := tokensOf(seq)
	b := newBanner(c, len(p.single)+len(p.multi))
	for _, id := range p.single {
		b.ban(id)
	}
	for _, s := range p.multi {
		prefix := s[:len(s)-1]
		if len(tokens) >= len(prefix) && slices.Equal(tokens[len(tokens)-len(prefix):], prefix) {
			b.ban(s[len(s)-1])
		}
	}
	b.flush()
	return nil
}
