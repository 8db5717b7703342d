package constraint_test

import (
	"testing"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/tokentrie"
)

// BenchmarkMask measures one token mask on the embedded vocabulary, averaged over the states
// reached after every byte of a document (each op is one mask at one of those states).
func BenchmarkMask(b *testing.B) {
	_, tok := openDefault(b)
	constraint.TrieFor(tok) // built once per tokenizer, outside the measurement
	cases := []struct{ name, grammar, text string }{
		{"json", jsonGrammar, `{"name": "Ann Smith", "list": [1, -2.5e3, true, {"x": null}], "note": "In the beginning God created the heaven and the earth."}`},
		{"person", personGrammar, `{ "name": "Bob smith", "age": 42, "tags": ["x", "yy"] }`},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			p, err := constraint.NewGrammar(tc.grammar)
			if err != nil {
				b.Fatal(err)
			}
			var states []*constraint.Processor
			for cut := 0; cut <= len(tc.text); cut++ {
				q := p.Clone().(*constraint.Processor)
				if _, ok := q.Matcher().AdvanceBytes([]byte(tc.text[:cut])); !ok {
					b.Fatalf("prefix %q rejected", tc.text[:cut])
				}
				states = append(states, q)
			}
			b.ResetTimer()
			i := 0
			for b.Loop() {
				states[i%len(states)].Mask(tok)
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
