package earley

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/grammar"
)

// chainGrammar is a string of at least three letters written as a chain of rules.
const chainGrammar = `root ::= "\"" s0 "\""
s0 ::= a s1
s1 ::= b s2
s2 ::= c tail
tail ::= d*
a ::= [a-z]
b ::= [a-z]
c ::= [a-z]
d ::= [a-z]`

// mixedGrammar has a loop over a rule and a chain of copies of rules equal to it.
const mixedGrammar = `root ::= "\"" a tail1 "\"" | "'" s0 "'"
tail1 ::= a*
s0 ::= b s1
s1 ::= c tail2
tail2 ::= d*
a ::= [a-z]
b ::= [a-z]
c ::= [a-z]
d ::= [a-z]`

// TestActiveRuns checks which repetitions the parser reports at several points, with their
// budgets, and that the automaton counts the copies a byte string starts.
func TestActiveRuns(t *testing.T) {
	tests := []struct {
		grammar, prefix string
		budgets         []int // of the runs reported, in order
	}{
		{`root ::= [a-z]*`, "", []int{-1}},
		{`root ::= [a-z]*`, "abc", []int{-1}},
		{`root ::= "\"" [a-z]{2,6} "\""`, `"`, []int{6}},
		{`root ::= "\"" [a-z]{2,6} "\""`, `"a`, []int{5}},
		{`root ::= "\"" [a-z]{2,6} "\""`, `"abc`, []int{}}, // 3 left: walked
		{`root ::= "x" [0-9]+ "y"`, `x`, []int{-1}},
		{`root ::= "ab" | "cd"`, "", []int{}},
		{"root ::= r\nr ::= \"(\" r \")\" | [a-z]*", "((", []int{-1}},
		// X then a rule that is only a repetition (N ::= M, M ::= ε | M Y): one run of X Y*
		{"root ::= \"\\\"\" [a-z] tail \"\\\"\"\ntail ::= [a-z]*", `"`, []int{-1}},
		{"root ::= \"\\\"\" [a-z] tail \"\\\"\"\ntail ::= [a-z]*", `"ab`, []int{-1}},
		// required copies before a repetition, each copy's body a rule of its own with the same
		// rules (X X X*, as a schema's minLength is written): every prefix is one of X*
		{chainGrammar, `"`, []int{-1}},
		{chainGrammar, `"a`, []int{-1}},
		{chainGrammar, `"abcd`, []int{-1}},
		{"root ::= \"\\\"\" s0 \"\\\"\"\ns0 ::= a s1\ns1 ::= b\na ::= [a-z]\nb ::= [0-9]", `"`, []int{}}, // different bodies: walked
		// a loop over a and a chain over b, c, d with a's rules: one representative for all
		{mixedGrammar, `"`, []int{-1}},
		{mixedGrammar, `"ab`, []int{-1}},
		{mixedGrammar, `'`, []int{-1}},
		{mixedGrammar, `'xy`, []int{-1}},
	}
	for _, tt := range tests {
		m := New(grammar.MustCompile(tt.grammar))
		if _, ok := m.AdvanceBytes([]byte(tt.prefix)); !ok {
			t.Fatalf("%s: prefix %q rejected", tt.grammar, tt.prefix)
		}
		runs := m.ActiveRuns(nil)
		if len(runs) != len(tt.budgets) {
			t.Errorf("%s after %q: %d runs, want %d", tt.grammar, tt.prefix, len(runs), len(tt.budgets))
			continue
		}
		for i, r := range runs {
			if r.Budget != tt.budgets[i] {
				t.Errorf("%s after %q: run %d budget %d, want %d", tt.grammar, tt.prefix, i, r.Budget, tt.budgets[i])
			}
		}
	}

	m := New(grammar.MustCompile(`root ::= [a-zé日]*`))
	runs := m.ActiveRuns(nil)
	if len(runs) != 1 || !runs[0].Automaton.Counted() {
		t.Fatalf("runs %v: want one counted run", runs)
	}
	a := runs[0].Automaton
	for _, tc := range []struct {
		text   string
		copies int
		alive  bool
	}{
		{"ab", 2, true}, {"é", 1, true}, {"aé日", 3, true}, {"日"[:2], 1, true}, {"aB", 0, false}, {"\xa9", 0, false},
	} {
		s, n := a.Start(), 0
		for _, b := range []byte(tc.text) {
			var started bool
			if s, started = a.Step(s, b); started {
				n++
			}
			if s == 0 {
				break
			}
		}
		if (s != 0) != tc.alive || tc.alive && n != tc.copies {
			t.Errorf("%q: alive %v, %d copies; want %v, %d", tc.text, s != 0, n, tc.alive, tc.copies)
		}
	}
}

// TestCachedAutomatonIsTheBuiltOne checks the cache of automata by sub-grammar against
// building every automaton afresh: over random grammars (each compiled twice, so that the
// second compile finds the first's automata), for every nonterminal x, x* and x y* for every
// nonterminal y have the transitions of the automaton built from scratch, or neither exists.
func TestCachedAutomatonIsTheBuiltOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	keyOf := func(a *Automaton) string {
		if a == nil {
			return "<nil>"
		}
		return a.Key()
	}
	hits, reused := 0, 0
	for range 200 {
		src := randomGrammar(rng)
		first := map[grammar.Symbol]*Automaton{} // the first compile's x*, by nonterminal
		for pass := range 2 {
			g, err := grammar.Parse(src)
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			cfg, err := grammar.Compile(g, "root")
			if err != nil {
				continue // a grammar with left recursion, say
			}
			self := make([]grammar.Symbol, len(cfg.Names)) // body[y] = y
			for n := range self {
				self[n] = grammar.Symbol(n)
			}
			for x := range cfg.Names {
				xs := grammar.Symbol(x)
				before := automata.built.Load()
				a := cachedAutomaton(cfg, xs, -1, self)
				builtNow := automata.built.Load() != before
				if got, want := keyOf(a), keyOf(newAutomaton(cfg, xs)); got != want {
					t.Fatalf("%s: %s*: cached %q, built %q", src, cfg.Names[x], got, want)
				} else if got != "<nil>" {
					hits++
				}
				if pass == 0 {
					first[xs] = a
					continue
				}
				if builtNow {
					t.Fatalf("%s: %s*: the second compile built its automaton again", src, cfg.Names[x])
				}
				if a != nil && a == first[xs] {
					reused++ // the second compile found the first's automaton by its rules
				}
				for y := range cfg.Names {
					ys := grammar.Symbol(y)
					if got, want := keyOf(cachedAutomaton(cfg, xs, ys, self)), keyOf(newLeadAutomaton(cfg, xs, ys)); got != want {
						t.Fatalf("%s: %s %s*: cached %q, built %q", src, cfg.Names[x], cfg.Names[y], got, want)
					}
				}
			}
		}
	}
	if hits < 100 {
		t.Fatalf("only %d regular repetitions met: the test checks too little", hits)
	}
	if reused < hits/4 {
		t.Fatalf("the second compile of a grammar reused %d automata of %d: the cache by sub-grammar is not used", reused, hits)
	}
	t.Logf("%d regular repetitions, %d found again by the second compile", hits, reused)
}

// TestLargeLeadHasNoAutomaton checks that a lead X Y* whose sub-grammar passes
// maxLeadKeyBytes gets no automaton (the parser walks that state), and a small one does.
func TestLargeLeadHasNoAutomaton(t *testing.T) {
	// Code points picked by a hash: every block of 64 that share their first two UTF-8 bytes
	// picks its own last bytes, so the class's UTF-8 automaton has a state and a production
	// per block.
	var class strings.Builder
	for r := uint32(0x1000); r < 0xD000; r++ {
		h := r * 0x9E3779B1
		h ^= h >> 15
		h *= 0x85EBCA77
		if (h^h>>13)&1 == 1 {
			fmt.Fprintf(&class, "\\u%04X", r)
		}
	}
	for _, tt := range []struct {
		x    string
		want bool
	}{
		{"[a-z]", true},
		{"[" + class.String() + "]", false},
	} {
		g := grammar.MustCompile("root ::= \"\\\"\" x tail \"\\\"\"\nx ::= " + tt.x + "\ntail ::= y*\ny ::= [a-z]")
		m := New(g)
		if _, ok := m.AdvanceBytes([]byte(`"`)); !ok {
			t.Fatal(`prefix " rejected`)
		}
		runs := m.ActiveRuns(nil)
		if got := len(runs) == 1; got != tt.want {
			t.Errorf("x ::= %.20s…: %d runs, want a run: %v", tt.x, len(runs), tt.want)
		}
		x := grammar.Symbol(slices.Index(g.Names, "x"))
		key := grammarKey([]byte("lead"), g, x, grammar.Symbol(slices.Index(g.Names, "y")))
		if tt.want == (len(key) > maxLeadKeyBytes) {
			t.Errorf("x ::= %.20s…: key of %d bytes, the bound is %d", tt.x, len(key), maxLeadKeyBytes)
		}
	}
}

// TestLongChainHasNoAutomaton checks that a repetition whose body holds a bounded repetition
// of more than maxChainInAutomaton copies (the items of an array of strings of at most N
// characters) gets no automaton, and none is built for it, while one of a short chain does.
func TestLongChainHasNoAutomaton(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want bool
	}{
		{8, true},
		{maxChainInAutomaton, true},
		{maxChainInAutomaton + 1, false},
		{200, false},
	} {
		g := grammar.MustCompile(fmt.Sprintf("root ::= \"[\" item (\",\" item)* \"]\"\nitem ::= \"\\\"\" [a-z]{0,%d} \"\\\"\"", tt.n))
		m := New(g)
		if _, ok := m.AdvanceBytes([]byte(`["abc"`)); !ok {
			t.Fatal(`prefix ["abc" rejected`)
		}
		built := automata.built.Load()
		runs := m.ActiveRuns(nil)
		if got := len(runs) == 1; got != tt.want {
			t.Errorf("items of at most %d characters: %d runs, want a run: %v", tt.n, len(runs), tt.want)
		}
		if !tt.want && automata.built.Load() != built {
			t.Errorf("items of at most %d characters: %d automata built", tt.n, automata.built.Load()-built)
		}
		// The characters of a string are a run of their own either way, with its budget.
		if _, ok := m.AdvanceBytes([]byte(`,"ab`)); !ok {
			t.Fatal(`,"ab rejected`)
		}
		if runs := m.ActiveRuns(nil); len(runs) != 1 || runs[0].Budget != tt.n-2 {
			t.Errorf("items of at most %d characters, inside one: runs %v, want one of budget %d", tt.n, runs, tt.n-2)
		}
	}
}
