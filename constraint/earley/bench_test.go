package earley

import (
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/grammar"
)

// BenchmarkAdvance measures feeding bytes one at a time (each op is one byte): inside a JSON
// string, and through a run of whitespace written with left recursion (ws ::= [ ]*) and with
// right recursion (ws ::= ([ ] ws)?, as llama.cpp's json.gbnf writes it), which Leo's
// optimisation keeps at constant work per byte.
func BenchmarkAdvance(b *testing.B) {
	cases := []struct{ name, grammar, text string }{
		{"string", jsonGrammar, `{"k": "` + strings.Repeat("In the beginning. ", 50) + `"}`},
		{"ws-left-1000", `root ::= "[" [ ]* "]"`, "[" + strings.Repeat(" ", 1000) + "]"},
		{"ws-right-1000", "root ::= \"[\" ws \"]\"\nws ::= ([ ] ws)?", "[" + strings.Repeat(" ", 1000) + "]"},
	}
	for _, tc := range cases {
		g := grammar.MustCompile(tc.grammar)
		b.Run(tc.name, func(b *testing.B) {
			m := New(g)
			i := 0
			for b.Loop() {
				if i == len(tc.text) {
					m.Rollback(0)
					i = 0
				}
				if !m.Advance(tc.text[i]) {
					b.Fatalf("byte %d rejected", i)
				}
				i++
			}
		})
	}
}

// BenchmarkStayingBytes asks, inside a JSON string, which bytes may come next and after which
// the state stays the same (what a token-trie walk asks first from a state with slices).
func BenchmarkStayingBytes(b *testing.B) {
	m := New(grammar.MustCompile(jsonGrammar))
	if _, ok := m.AdvanceBytes([]byte(`{"name": "ab`)); !ok {
		b.Fatal("prefix rejected")
	}
	for b.Loop() {
		if _, _, ok := m.StayingBytes(128, 16); !ok {
			b.Fatal("refused")
		}
	}
}
