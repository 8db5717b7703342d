package earley

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/grammar"
)

// derives is a reference recogniser independent of the Earley parser: a fixpoint over the
// table D[n][i][j] = "nonterminal n derives s[i:j]", which handles empty rules and left and
// right recursion alike. It is cubic and more, for short strings only.
func derives(g *grammar.CFG, s string) bool {
	n := len(s)
	d := make([][][]bool, len(g.Names))
	for a := range d {
		d[a] = make([][]bool, n+1)
		for i := range d[a] {
			d[a][i] = make([]bool, n+1)
		}
	}
	for changed := true; changed; {
		changed = false
		for _, p := range g.Prods {
			for i := 0; i <= n; i++ {
				cur := map[int]bool{i: true}
				for _, sym := range p.RHS {
					next := map[int]bool{}
					for k := range cur {
						if sym.IsTerminal() {
							if k < n && g.Terminals[sym.Terminal()].Has(s[k]) {
								next[k+1] = true
							}
							continue
						}
						for j := k; j <= n; j++ {
							if d[sym][k][j] {
								next[j] = true
							}
						}
					}
					cur = next
				}
				for j := range cur {
					if !d[p.LHS][i][j] {
						d[p.LHS][i][j] = true
						changed = true
					}
				}
			}
		}
	}
	return d[g.Start][0][n]
}

// randomGrammar writes a small random GBNF grammar over the letters a and b, with empty
// alternatives, recursion of every kind and repetition operators.
func randomGrammar(rng *rand.Rand) string {
	const rules = 4
	var b strings.Builder
	for r := range rules {
		name := "root"
		if r > 0 {
			name = fmt.Sprintf("r%d", r)
		}
		fmt.Fprintf(&b, "%s ::=", name)
		for alt := range 1 + rng.IntN(3) {
			if alt > 0 {
				b.WriteString(" |")
			}
			syms := rng.IntN(4)
			if syms == 0 {
				b.WriteString(` ""`) // an empty alternative, written so that no line ends in |
			}
			for range syms {
				switch k := rng.IntN(8); {
				case k < 3:
					fmt.Fprintf(&b, " %q", string(rune('a'+rng.IntN(2))))
				case k == 3:
					b.WriteString(" [ab]")
				default:
					if t := rng.IntN(rules); t == 0 {
						b.WriteString(" root")
					} else {
						fmt.Fprintf(&b, " r%d", t)
					}
				}
				if rng.IntN(5) == 0 {
					b.WriteByte("?*+"[rng.IntN(3)])
				}
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestRandomGrammarsAgainstReference compares the Earley matcher with the reference
// recogniser on random grammars and every string over {a, b} up to length 6.
func TestRandomGrammarsAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var all []string
	for n := 0; n <= 6; n++ {
		for bits := 0; bits < 1<<n; bits++ {
			s := make([]byte, n)
			for i := range s {
				s[i] = 'a' + byte(bits>>i&1)
			}
			all = append(all, string(s))
		}
	}
	compiled, nonTrivial := 0, 0
	for range 150 {
		src := randomGrammar(rng)
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatalf("generated grammar does not parse: %v\n%s", err, src)
		}
		cfg, err := grammar.Compile(g, "root")
		if err != nil {
			continue // derives nothing: an error by design
		}
		compiled++
		m := New(cfg)
		accepted := 0
		for _, s := range all {
			want := derives(cfg, s)
			m.Rollback(0)
			_, ok := m.AdvanceBytes([]byte(s))
			if got := ok && m.IsAccepting(); got != want {
				t.Fatalf("%q: matcher %v, reference %v, grammar:\n%s", s, got, want, src)
			}
			if want {
				accepted++
			}
		}
		if accepted > 1 && accepted < len(all) {
			nonTrivial++
		}
	}
	t.Logf("%d grammars compiled, %d with a non-trivial language", compiled, nonTrivial)
	if compiled < 100 || nonTrivial < 60 {
		t.Fatalf("only %d grammars compiled and %d were non-trivial: the comparison is too weak", compiled, nonTrivial)
	}
}
