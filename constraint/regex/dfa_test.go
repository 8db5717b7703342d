package regex

import (
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/grammar"
)

// words are strings over a small alphabet (with a non-ASCII letter), every one up to length 4
// and 2 000 random longer ones (up to length 3 and 1 500 under the race detector).
func words() []string {
	depth, random := 4, 2000
	if raceEnabled {
		depth, random = 3, 1500
	}
	alphabet := []string{"a", "b", "f", "o", "0", "9", "_", "é", "\n"}
	out := []string{""}
	level := []string{""}
	for range depth {
		var next []string
		for _, w := range level {
			for _, a := range alphabet {
				next = append(next, w+a)
			}
		}
		out = append(out, next...)
		level = next
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range random {
		w := ""
		for range 5 + rng.IntN(10) {
			w += alphabet[rng.IntN(len(alphabet))]
		}
		out = append(out, w)
	}
	return out
}

var dfaPatterns = []string{
	`f.*o`, `a*`, `aaa*`, `[0-9]{2,}`, `X_`, `(?s:.*)b(?s:.*)`, `^.*bar$`, `\p{Letter}+`, `(?i)fo+`,
	`a{2,4}|b`, `[^a]*`, `(ab|ba)*o?`, ``, `(?s).{0,3}`,
}

// TestDFAMatchesRegexp checks each DFA against Go's regexp matching the whole string.
func TestDFAMatchesRegexp(t *testing.T) {
	ws := words()
	for _, p := range dfaPatterns {
		d, err := DFAOf(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		for _, w := range ws {
			if got, want := d.Match(w), re.MatchString(w); got != want {
				t.Fatalf("%q on %q: DFA %v, regexp %v", p, w, got, want)
			}
		}
	}
}

// TestProductOperations checks intersection, difference and complement word by word, and
// that the grammar of a DFA accepts what the DFA accepts.
func TestProductOperations(t *testing.T) {
	ws := words()
	for i, p := range dfaPatterns {
		q := dfaPatterns[(i+3)%len(dfaPatterns)]
		a, _ := DFAOf(p)
		b, _ := DFAOf(q)
		and, err := Intersect(a, b)
		if err != nil {
			t.Fatal(err)
		}
		minus, err := Minus(a, b)
		if err != nil {
			t.Fatal(err)
		}
		not, err := Complement(a)
		if err != nil {
			t.Fatal(err)
		}
		var cfg *grammar.CFG
		if minus != nil {
			rules := minus.Grammar("s")
			cfg, err = grammar.Compile(&grammar.Grammar{Rules: rules}, rules[0].Name)
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, w := range ws {
			ma, mb := a.Match(w), b.Match(w)
			if and != nil && and.Match(w) != (ma && mb) || and == nil && ma && mb {
				t.Fatalf("%q ∩ %q on %q", p, q, w)
			}
			if minus != nil && minus.Match(w) != (ma && !mb) || minus == nil && ma && !mb {
				t.Fatalf("%q − %q on %q", p, q, w)
			}
			if not != nil && not.Match(w) == ma || not == nil && !ma {
				t.Fatalf("¬%q on %q", p, w)
			}
			if cfg != nil {
				m := earley.New(cfg)
				ok := true
				for _, c := range []byte(w) {
					if !m.Advance(c) {
						ok = false
						break
					}
				}
				if ok = ok && m.IsAccepting(); ok != (ma && !mb) {
					t.Fatalf("grammar of %q − %q on %q: %v", p, q, w, ok)
				}
			}
		}
	}
}

// TestDFAsAreMinimal checks that DFAOf and the products give minimal automata, for languages
// whose smallest automaton is known, and that the minimal ones still accept what they
// should. (TestDFAMatchesRegexp and TestProductOperations check every pattern's language.)
func TestDFAsAreMinimal(t *testing.T) {
	for _, tc := range []struct {
		re     string
		states int
	}{
		{`a+|aa*`, 2}, // start, then a loop on a
		{`(a|b)*`, 1}, // one accepting loop
		{`aaa*`, 3},   // "", "a", then the loop
		{`[^a]*a[^a]*`, 2},
	} {
		d, err := DFAOf(tc.re)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.States) != tc.states {
			t.Errorf("%q: %d states, want %d", tc.re, len(d.States), tc.states)
		}
	}
	// "Not only letters": a first letter and further letters are one state that loops.
	letters, _ := DFAOf(`\p{Letter}+`)
	not, err := Complement(letters)
	if err != nil {
		t.Fatal(err)
	}
	if len(not.States) != 3 {
		t.Errorf("complement of letters+: %d states, want 3 (start, letters so far, anything)", len(not.States))
	}
	for w, want := range map[string]bool{"": true, "π": false, "πa": false, "ab1": true, "1": true} {
		if got := not.Match(w); got != want {
			t.Errorf("complement of letters+ on %q: %v, want %v", w, got, want)
		}
	}
}
