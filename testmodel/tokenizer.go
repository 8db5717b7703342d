package testmodel

import (
	"strings"

	"github.com/loomlm/loom/core"
)

// Tokenizer is the word-level tokenizer of the test model: words are separated by spaces, and
// every word token decodes with a leading space, like SentencePiece pieces.
type Tokenizer struct {
	vocab []string
	bytes [][]byte
	ids   map[string]core.TokenID
}

func newTokenizer(vocab []string) *Tokenizer {
	t := &Tokenizer{vocab: vocab, ids: make(map[string]core.TokenID, len(vocab))}
	for i, w := range vocab {
		t.ids[w] = core.TokenID(i)
		var b []byte
		if i > int(EOS) {
			b = []byte(" " + w)
		}
		t.bytes = append(t.bytes, b)
	}
	return t
}

// Encode implements core.Tokenizer. Unknown words become <unk>; "<s>" and "</s>" in the text
// are special tokens only with ParseSpecial.
func (t *Tokenizer) Encode(text string, opts core.EncodeOptions) ([]core.TokenID, error) {
	var out []core.TokenID
	if opts.AddSpecial {
		out = append(out, BOS)
	}
	for _, w := range strings.Fields(text) {
		id, ok := t.ids[w]
		if !ok || (id <= EOS && !opts.ParseSpecial) {
			id = UNK
		}
		out = append(out, id)
	}
	return out, nil
}

// Decode implements core.Tokenizer.
func (t *Tokenizer) Decode(ids []core.TokenID) string {
	var b strings.Builder
	for _, id := range ids {
		b.Write(t.TokenBytes(id))
	}
	return strings.TrimPrefix(b.String(), " ")
}

// TokenBytes implements core.Tokenizer.
func (t *Tokenizer) TokenBytes(id core.TokenID) []byte {
	if id < 0 || int(id) >= len(t.bytes) {
		return nil
	}
	return t.bytes[id]
}

// Piece implements core.Tokenizer.
func (t *Tokenizer) Piece(id core.TokenID) string {
	if id < 0 || int(id) >= len(t.vocab) {
		return ""
	}
	return t.vocab[id]
}

// VocabSize implements core.Tokenizer.
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// Special implements core.Tokenizer.
func (t *Tokenizer) Special() core.SpecialTokens {
	return core.SpecialTokens{BOS: BOS, EOS: EOS, UNK: UNK, PAD: -1, EndOfGeneration: []core.TokenID{EOS}}
}
