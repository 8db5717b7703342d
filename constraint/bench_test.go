package constraint_test

import (
	"testing"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/tokentrie"
	"github.com/loomlm/loom/core"
)

// BenchmarkMask measures one token mask on the embedded vocabulary as a decode loop computes
// it: along the canonical tokenization of a document, each op computes the mask of the
// current state and then accepts the document's next token (a new processor at the end of the
// document). "cold" computes each state's mask on a fresh clone, whose memo is empty.
func BenchmarkMask(b *testing.B) {
	_, tok := openDefault(b)
	constraint.TrieFor(tok) // built once per tokenizer, outside the measurement
	seq, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct{ name, grammar, text string }{
		{"json", jsonGrammar, `{"name": "Ann Smith", "list": [1, -2.5e3, true, {"x": null}], "note": "In the beginning God created the heaven and the earth."}`},
		{"person", personGrammar, `{ "name": "Bob smith", "age": 42, "tags": ["x", "yy"] }`},
	}
	for _, tc := range cases {
		start, err := constraint.NewGrammar(tc.grammar)
		if err != nil {
			b.Fatal(err)
		}
		ids, err := tok.Encode(tc.text, core.EncodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/decode", func(b *testing.B) {
			p := start.Clone().(*constraint.Processor)
			i := 0
			for b.Loop() {
				if i == len(ids) {
					p, i = start.Clone().(*constraint.Processor), 0
				}
				if !p.Mask(tok).Has(ids[i]) {
					b.Fatalf("token %d of the document is not allowed", i)
				}
				p.Accept(seq, ids[i])
				i++
			}
		})
		b.Run(tc.name+"/cold", func(b *testing.B) {
			var states []*constraint.Processor
			p := start.Clone().(*constraint.Processor)
			for _, id := range ids {
				states = append(states, p.Clone().(*constraint.Processor))
				p.Accept(seq, id)
			}
			i := 0
			for b.Loop() {
				states[i%len(states)].Clone().(*constraint.Processor).Mask(tok)
				i++
			}
		})
	}
}

// BenchmarkTrieBuild measures building the token trie of the embedded vocabulary (done once
// per tokenizer).
func BenchmarkTrieBuild(b *testing.B) {
	_, tok := openDefault(b)
	for b.Loop() {
		tokentrie.New(tok)
	}
}

// BenchmarkCompile measures parsing and compiling the JSON grammar.
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := constraint.NewGrammar(jsonGrammar); err != nil {
			b.Fatal(err)
		}
	}
}
