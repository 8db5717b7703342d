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
