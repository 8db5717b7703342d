package tokentrie_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/tokentrie"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/llama3vocab"
)

// exceptNames is a property name's rest after its opening quote, for an object that admits
// every name but those listed: bytes but '"' and '\\', then the closing quote unless the
// bytes are a listed name, then ':'. States 1…len(prefixes): the bytes so far are
// prefixes[s−1], a prefix of a listed name ("" first); then out (no name's prefix), closed
// and colon.
type exceptNames struct {
	key      string
	prefixes []string
	names    map[string]bool
	index    map[string]uint32
}

func newExceptNames(names ...string) *exceptNames {
	e := &exceptNames{key: "except:" + strings.Join(names, ","), prefixes: []string{""}, names: map[string]bool{}, index: map[string]uint32{"": 1}}
	for _, n := range names {
		e.names[n] = true
		for i := 1; i <= len(n); i++ {
			if _, ok := e.index[n[:i]]; !ok {
				e.prefixes = append(e.prefixes, n[:i])
				e.index[n[:i]] = uint32(len(e.prefixes))
			}
		}
	}
	return e
}

func (e *exceptNames) Key() string   { return e.key }
func (e *exceptNames) Start() uint32 { return 1 }
func (e *exceptNames) Counted() bool { return false }
func (e *exceptNames) Step(s uint32, b byte) (uint32, bool) {
	n := uint32(len(e.prefixes))
	out, closed, colon := n+1, n+2, n+3
	switch {
	case s == closed:
		if b == ':' {
			return colon, false
		}
		return 0, false
	case s == colon || b == '\\':
		return 0, false
	case b == '"':
		if s <= n && e.names[e.prefixes[s-1]] {
			return 0, false
		}
		return closed, false
	case s == out:
		return out, false
	}
	if j, ok := e.index[e.prefixes[s-1]+string(b)]; ok {
		return j, false
	}
	return out, false
}

// renumbered is an automaton with its states numbered otherwise (s ↔ s+1000), to the slice
// cache another automaton of the same language.
type renumbered struct{ tokentrie.Automaton }

func (r renumbered) Key() string   { return "renumbered:" + r.Automaton.Key() }
func (r renumbered) Start() uint32 { return r.Automaton.Start() + 1000 }
func (r renumbered) Step(s uint32, b byte) (uint32, bool) {
	n, started := r.Automaton.Step(s-1000, b)
	if n == 0 {
		return 0, false
	}
	return n + 1000, started
}

// TestShadowSlicesMatchPlainPasses checks that a slice built in the shadow of another (below
// the trie nodes where the new automaton accepts what the other accepts from where it is, the
// other's nodes and tokens are copied) equals the plain pass over the whole trie, on Llama 3's
// vocabulary and the embedded model's: names of objects that admit all but some (where the
// shadow must leave most of the trie to the copy), random automata that run into their base,
// random automata beside others, and an automaton that reaches the base's start state
// where the base is elsewhere (a(ab)* beside (ab)*). An automaton in step from its start is not shadowed (its language's
// slice is shared). Mutations of the copy (the skipped
// nodes, the tokens, the rejected node below a copied subtree) fail it.
func TestShadowSlicesMatchPlainPasses(t *testing.T) {
	names := newExceptNames("id", "name", "type", "created_at", "\u00e9t\u00e9", "a")
	base := newExceptNames()
	r := rand.New(rand.NewPCG(3, 9))
	type pair struct {
		name    string
		a, base tokentrie.Automaton
		inStep  bool // the shadow must leave nodes in step
	}
	pairs := []pair{
		{"names but six", names, base, true},
		{"names but six, tables", tabulate(names), tabulate(base), true},
		{"the base's start elsewhere", aThenAB{}, wordLoop("ab"), false},
	}
	for k := range 8 {
		b := newRandomDFA(r, 1+k%3, []float64{0.01, 0.2, 0.5}[k%3])
		a := newLeadInto(r, 1+k, b)
		pairs = append(pairs, pair{"random lead into the base", a, b, k%3 == 0}, pair{"random lead into the base, tables", tabulate(a), tabulate(b), k%3 == 0})
		pairs = append(pairs, pair{"random against random", newRandomDFA(r, 1+k, 0.1), newRandomDFA(r, 2+k, 0.1), false})
	}
	for _, voc := range []struct {
		name string
		tok  core.Tokenizer
	}{{"llama3", llama3vocab.Tokenizer(t)}, {"embedded", embeddedTokenizer(t)}} {
		trie := tokentrie.New(voc.tok)
		for _, p := range pairs {
			shadowed, steps, err := trie.CheckShadow(p.a, p.base)
			if err != nil {
				t.Fatalf("%s, %s: %v", voc.name, p.name, err)
			}
			if p.inStep && (!shadowed || steps == 0) {
				t.Errorf("%s, %s: shadowed %v with %d nodes in step, want some", voc.name, p.name, shadowed, steps)
			}
			t.Logf("%s, %s: shadowed %v, %d nodes in step", voc.name, p.name, shadowed, steps)
		}
	}
	if !tokentrie.SameLanguage(renumbered{names}, tabulate(names)) || tokentrie.SameLanguage(names, base) {
		t.Error("languages: renumbered and tabulated names differ, or names but six equal every name")
	}
	trie := tokentrie.New(embeddedTokenizer(t))
	if shadowed, _, err := trie.CheckShadow(renumbered{names}, names); shadowed || err != nil {
		t.Errorf("an automaton in the shadow of one of its language: shadowed %v, %v (the slice is shared instead)", shadowed, err)
	}
}

// leadInto is a random automaton whose lead states (1…len(lead)) go to lead states, to the
// base's states (numbered after them) or nowhere, then runs the base: where it enters the base
// in the state the base is in, it is in step with it.
type leadInto struct {
	key  string
	lead [][256]uint32
	base randomDFA
}

func newLeadInto(r *rand.Rand, leads int, base randomDFA) leadInto {
	a := leadInto{key: "lead:" + base.key, lead: make([][256]uint32, leads), base: base}
	for s := range a.lead {
		for b := range 256 {
			switch x := r.Float64(); {
			case x < 0.2:
			case x < 0.6:
				a.lead[s][b] = uint32(1 + r.IntN(leads))
			default:
				a.lead[s][b] = uint32(leads + 1 + r.IntN(len(base.trans)))
			}
		}
	}
	return a
}

func (a leadInto) Key() string   { return a.key }
func (a leadInto) Start() uint32 { return 1 }
func (a leadInto) Counted() bool { return false }
func (a leadInto) Step(s uint32, b byte) (uint32, bool) {
	if int(s) <= len(a.lead) {
		return a.lead[s-1][b], false
	}
	n, _ := a.base.Step(s-uint32(len(a.lead)), b)
	if n == 0 {
		return 0, false
	}
	return n + uint32(len(a.lead)), false
}

// aThenAB is a(ab)*: after its first byte it is in wordLoop("ab")'s start state, while
// wordLoop("ab"), after the same byte, expects 'b'.
type aThenAB struct{}

func (aThenAB) Key() string   { return "aThenAB" }
func (aThenAB) Start() uint32 { return 3 }
func (aThenAB) Counted() bool { return false }
func (aThenAB) Step(s uint32, b byte) (uint32, bool) {
	if s == 3 {
		if b == 'a' {
			return 1, false
		}
		return 0, false
	}
	return wordLoop("ab").Step(s, b)
}

// TestSliceSharedByLanguage checks that the slice cache gives automata of one language one
// unbounded slice, whatever their transitions, and that a budget asked of one of them later
// leaves the shared slice as it was.
func TestSliceSharedByLanguage(t *testing.T) {
	trie := tokentrie.New(embeddedTokenizer(t))
	a := trie.Slice(notQuote{}, -1)
	b := trie.Slice(renumbered{notQuote{}}, -1)
	if a != b {
		t.Fatal("[^\"\\\\]* renumbered: another slice")
	}
	before := a.Tokens()
	mask := slices.Clone(tokentrie.SliceTokens(a))
	trie.Slice(renumbered{notQuote{}}, 2)
	if a.Tokens() != before || !slices.Equal(tokentrie.SliceTokens(a), mask) {
		t.Fatal("a budget changed the shared slice")
	}
	if trie.Slice(classLoop{0, 250}, -1) == a {
		t.Fatal("[\\x00-\\xfa]* shares [^\"\\\\]*'s slice")
	}
}

// BenchmarkReduce times the steps of a slice built in a shadow on Llama 3's trie, for the
// names of an object that admits every name but twelve (a 77-state automaton) beside the
// string of any name: its reachable states, its minimal automaton and key, the shadow, and
// the passes in the shadow and without ("minimal" includes "reachable").
func BenchmarkReduce(b *testing.B) {
	trie := tokentrie.New(llama3vocab.Tokenizer(b))
	names := newExceptNames("id", "name", "type", "created_at", "updated_at", "owner", "description", "tags", "status", "priority", "labels", "url")
	steps, err := trie.ReduceSteps(tabulate(names), tabulate(newExceptNames()))
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"reachable", "minimal", "languageKey", "newShadow", "shadowPass", "plainPass"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				steps[name]()
			}
		})
	}
}

// BenchmarkChildParts builds the child slice parts of a property name's automaton (the names
// of an object that admits every name but twelve) below every first byte of Llama 3's trie.
func BenchmarkChildParts(b *testing.B) {
	trie := tokentrie.New(llama3vocab.Tokenizer(b))
	names := tabulate(newExceptNames("id", "name", "type", "created_at", "updated_at", "owner", "description", "tags", "status", "priority", "labels", "url"))
	for b.Loop() {
		trie.BuildChildParts(names)
	}
}
