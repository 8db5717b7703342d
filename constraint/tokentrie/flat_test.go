package tokentrie_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loomlm/loom/constraint/tokentrie"
)

// randomDFA is an automaton with random transitions over a few states: a byte is rejected
// with probability reject, else it leads to a random state.
type randomDFA struct {
	key   string
	trans [][256]uint32
}

func newRandomDFA(r *rand.Rand, states int, reject float64) randomDFA {
	a := randomDFA{key: fmt.Sprintf("random%d", r.Uint64()), trans: make([][256]uint32, states)}
	for s := range a.trans {
		for b := range 256 {
			if r.Float64() >= reject {
				a.trans[s][b] = uint32(1 + r.IntN(states))
			}
		}
	}
	return a
}

func (a randomDFA) Key() string   { return a.key }
func (a randomDFA) Start() uint32 { return 1 }
func (a randomDFA) Counted() bool { return true }
func (a randomDFA) Step(s uint32, b byte) (uint32, bool) {
	n := a.trans[s-1][b]
	return n, n == 1
}

// TestSlicePassesMatchRecomputation checks the passes that make slices — without copy counts
// (every unbounded slice) and with them (for budgets) — against a recomputation from scratch
// (each trie node's bytes stepped through the automaton from its start), on the embedded
// model's vocabulary, for random automata from everything accepted to nothing, and for the
// string and digit loops: the same tokens and count, the same subtrees skipped, unbounded and
// within budgets from 0 to more than any token starts.
func TestSlicePassesMatchRecomputation(t *testing.T) {
	tok := embeddedTokenizer(t)
	trie := tokentrie.New(tok)
	r := rand.New(rand.NewPCG(7, 7))
	autos := []tokentrie.Automaton{notQuote{}, tabulate(notQuote{}), classLoop{'0', '9'}, tabulate(classLoop{'a', 'z'}), hexPairs{}, tabulate(hexPairs{})}
	for _, reject := range []float64{0, 0.01, 0.1, 0.5, 0.9, 0.99, 1} {
		for _, states := range []int{1, 3, 17} {
			autos = append(autos, newRandomDFA(r, states, reject), tabulate(newRandomDFA(r, states, reject)))
		}
	}
	for k, a := range autos {
		budgets := []int{0, 1, 2, 3, 5, 8, trie.MaxTokenLen() - 1, trie.MaxTokenLen(), 1000}
		if err := trie.CheckPasses(a, budgets); err != nil {
			t.Fatalf("automaton %d (%s): %v", k, a.Key(), err)
		}
	}
}
