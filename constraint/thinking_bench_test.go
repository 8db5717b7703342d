package constraint_test

import (
	"testing"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/llama3vocab"
	"github.com/loomlm/loom/reasoning"
)

// BenchmarkAfterThinking times AfterThinking's Process on Llama 3's 128k vocabulary (a dense
// row) while the reply thinks, where only tokens that may close the block are checked, and
// once the block has closed, before the answer, where every token is.
func BenchmarkAfterThinking(b *testing.B) {
	tok := llama3vocab.Tokenizer(b)
	constraint.TrieFor(tok)
	cfg := grammar.MustCompile(`root ::= "<call>" [a-z]{1,8} "</call>"`)
	row := make([]float32, tok.VocabSize())
	for _, tc := range []struct{ name, text string }{
		{"thinking", "<think>\nThe user asks about the weather, so I"},
		{"after", "<think>\nThe weather.\n</think>\n\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			a := constraint.NewAfterThinking(constraint.New("call", cfg), reasoning.Think, false)
			seq := newSeq(b, tok)
			ids, err := tok.Encode(tc.text, core.EncodeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for _, id := range ids {
				a.Accept(seq, id)
			}
			c := core.NewCandidates(row)
			for b.Loop() {
				c.Reset(row)
				if err := a.Process(seq, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
