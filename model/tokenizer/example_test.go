package tokenizer_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
	"github.com/loomlm/loom/model/tokenizer"
)

// Load a SentencePiece-style vocabulary from a GGUF file and encode and decode a text.
func Example() {
	// A tiny vocabulary: <unk>, <s>, </s>, a few pieces with their merge scores, and one
	// byte token.
	dir, _ := os.MkdirTemp("", "vocab")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "vocab.gguf")
	w := gguf.NewWriter()
	w.Set("tokenizer.ggml.model", "llama")
	w.Set("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi", "<0x21>"})
	w.Set("tokenizer.ggml.scores", []float32{0, 0, 0, -1, -2, -2, -3, -2.5, 0})
	w.Set("tokenizer.ggml.token_type", []int32{2, 3, 3, 1, 1, 1, 1, 1, 6})
	if err := w.WriteFile(path); err != nil {
		log.Fatal(err)
	}

	tok, err := tokenizer.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	ids, err := tok.Encode("hi hi!", core.EncodeOptions{AddSpecial: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range ids {
		fmt.Printf("%d %q\n", id, tok.Piece(id))
	}
	fmt.Printf("%q\n", tok.Decode(ids))
	// Output:
	// 1 "<s>"
	// 7 "▁hi"
	// 7 "▁hi"
	// 8 "<0x21>"
	// "hi hi!"
}

// Stream text as tokens arrive: a character whose bytes come in several tokens is written
// once it is complete.
func ExampleStreamDecoder() {
	tok, err := tokenizer.New(tokenizer.Vocab{
		Model:  tokenizer.ModelSPM,
		Tokens: []string{"<unk>", "▁caf", "<0xC3>", "<0xA9>"},
		Types:  []tokenizer.TokenType{tokenizer.Unknown, tokenizer.Normal, tokenizer.Byte, tokenizer.Byte},
		BOS:    -1, EOS: -1, UNK: 0, PAD: -1,
	})
	if err != nil {
		log.Fatal(err)
	}
	d := tokenizer.NewStreamDecoder(tok)
	for _, id := range []core.TokenID{1, 2, 3} {
		fmt.Printf("%q\n", d.Add(id))
	}
	fmt.Printf("%q\n", d.Flush())
	// Output:
	// " caf"
	// ""
	// "é"
	// ""
}
