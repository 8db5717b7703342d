// Command banwords is an example loom plugin: a logits processor that bans words, whatever
// their tokenisation. A word is never completed, whether the model would write it as one
// token, as several, or as part of a longer token: at each step the processor bans every token
// that would complete a banned word given the text so far.
//
// It reads only the token history (sdk.NeedsHistory), so no logits cross the process
// boundary; its answer is a short list of bans.
//
// Config ([plugins.config]):
//
//	words = ["LORD", "the king"]   # required: byte strings that must not appear in the output
//
// Build it with `go build -o bin/plugins/banwords ./examples/plugins/banwords`.
package main

import (
	"bytes"

	"github.com/loomlm/loom/sdk"
)

// BanWords bans tokens that would complete one of its words.
type BanWords struct {
	words [][]byte
	vocab *sdk.Vocabulary
	// always lists the tokens whose text contains a whole word.
	always []sdk.TokenID
	// completing[w][k] lists the tokens whose text starts with words[w][k:]: they complete
	// word w when the text so far ends with words[w][:k].
	completing [][][]sdk.TokenID
	maxLen     int
}

func (b *BanWords) Name() string     { return "ban_words" }
func (b *BanWords) Needs() sdk.Needs { return sdk.NeedsHistory }
func (b *BanWords) Doc() string {
	return "Bans the words of config words, whatever their tokenisation."
}

// Configure reads and validates the word list.
func (b *BanWords) Configure(cfg *sdk.Config) error {
	words := cfg.Strings("words", nil)
	if !cfg.Has("words") {
		cfg.Errorf("words", "missing: give the words to ban, e.g. words = [\"cat\"]")
	}
	for i, w := range words {
		if w == "" {
			cfg.Errorf("words", "word %d is empty", i)
			continue
		}
		b.words = append(b.words, []byte(w))
		b.maxLen = max(b.maxLen, len(w))
	}
	return nil
}

// UseVocabulary precomputes, for every word, which tokens complete it.
func (b *BanWords) UseVocabulary(v *sdk.Vocabulary) error {
	b.vocab = v
	b.completing = make([][][]sdk.TokenID, len(b.words))
	for w, word := range b.words {
		b.completing[w] = make([][]sdk.TokenID, len(word))
		for id, tok := range v.Tokens {
			if len(tok) == 0 {
				continue
			}
			if bytes.Contains(tok, word) {
				b.always = append(b.always, sdk.TokenID(id))
				continue
			}
			for k := 1; k < len(word); k++ {
				if bytes.HasPrefix(tok, word[k:]) {
					b.completing[w][k] = append(b.completing[w][k], sdk.TokenID(id))
				}
			}
		}
	}
	sdk.Log.Debug("ready", "words", len(b.words), "always_banned", len(b.always))
	return nil
}

// Process bans the tokens that would complete a word after the current text.
func (b *BanWords) Process(seq *sdk.Sequence, c *sdk.Candidates) error {
	for _, id := range b.always {
		c.Ban(id)
	}
	tail := b.tail(seq)
	for w, word := range b.words {
		for k := min(len(word)-1, len(tail)); k >= 1; k-- {
			if bytes.HasSuffix(tail, word[:k]) {
				for _, id := range b.completing[w][k] {
					c.Ban(id)
				}
			}
		}
	}
	return nil
}

// tail returns the last bytes of the sequence's text (prompt included) that a word could
// continue.
func (b *BanWords) tail(seq *sdk.Sequence) []byte {
	need := b.maxLen - 1
	var parts [][]byte
	n := 0
	toks := seq.Tokens()
	for i := len(toks) - 1; i >= 0 && n < need; i-- {
		t := b.vocab.TokenBytes(toks[i])
		parts = append(parts, t)
		n += len(t)
	}
	out := make([]byte, 0, n)
	for i := len(parts) - 1; i >= 0; i-- {
		out = append(out, parts[i]...)
	}
	return out[max(len(out)-need, 0):]
}

func main() { sdk.ServeProcessor(&BanWords{}) }
