package tokenizer

import (
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fixtures"
)

// FuzzEncode tokenises arbitrary bytes with the fixture vocabularies and the small test
// vocabularies: no panic or error, Decode gives the text back, and SentencePiece chunking
// agrees with the merge algorithm run on the whole text.
func FuzzEncode(f *testing.F) {
	toks := []*Tokenizer{mustNew(f, spmVocab(true, testPieces, testSpecials)),
		mustNew(f, bpeVocab("llama-bpe", []string{"Ġ t", "h e", "Ġt he"}, nil))}
	for _, name := range []string{"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"} {
		tok, err := Load(fixtures.Path(f, "vocab", name))
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
		for _, c := range strings.Split(string(fixtures.Read(f, "vocab", name+".inp")), "\n__ggml_vocab_test__\n") {
			f.Add(c)
		}
	}
	f.Add("Hello, y'all! 🦙\n\n  \t x\xff\xe4\xb8")
	f.Fuzz(func(t *testing.T, text string) {
		for _, tok := range toks {
			ids, err := tok.Encode(text, core.EncodeOptions{AddSpecial: true})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text, spmSpace) && tok.Model() == ModelSPM {
				continue // a literal "▁" comes back as a space
			}
			if got := tok.Decode(ids); got != text {
				t.Fatalf("%s: Decode(Encode(%q)) = %q", tok.Model(), text, got)
			}
			plain := !slices.ContainsFunc(ids, func(id core.TokenID) bool { return tok.Type(id) == UserDefined })
			if tok.Model() == ModelSPM && text != "" && plain {
				whole, err := tok.spmChunk(&spmScratch{}, nil, strings.ReplaceAll(" "+text, " ", spmSpace))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids[1:], whole) {
					t.Fatalf("%q: chunked %v, whole %v", text, ids[1:], whole)
				}
			}
		}
	})
}
