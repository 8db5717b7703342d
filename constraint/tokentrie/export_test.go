package tokentrie

import (
	"fmt"
	"slices"

	"github.com/loomlm/loom/core"
)

// CheckPasses builds a's slices with fresh passes over the trie — unbounded without copy
// counts, then counted (from scratch, and into the uncounted entry), with each of budgets — and compares each with a recomputation from
// scratch, every node's path stepped through a from its start: the tokens, their count, the
// subtrees skipped (every token below alive, and within the budget). For a counted automaton,
// Slice's answer for each budget is checked too.
func (t *Trie) CheckPasses(a Automaton, budgets []int) error {
	t.cache.mu.Lock()
	flat, counted := t.newSliceEntry(a, false), t.newSliceEntry(a, true)
	late := t.newSliceEntry(a, false) // counted after its unbounded slice, as Slice does for a later budget
	t.countCopies(late, a)
	t.cache.mu.Unlock()
	n := len(t.nodes)
	alive, copies := make([]bool, n), make([]int, n)
	path := make([]byte, t.maxLen+1)
	for i := 1; i < n; i++ {
		d := int(t.nodes[i].depth)
		path[d] = t.nodes[i].b
		st, c := a.Start(), 0
		for _, b := range path[1 : d+1] {
			next, started := a.Step(st, b)
			if st = next; st == 0 {
				break
			}
			if started {
				c++
			}
		}
		alive[i], copies[i] = st != 0, c
	}
	check := func(name string, s *Slice, budget int) error {
		in := func(i int) bool { return alive[i] && (budget < 0 || copies[i] <= budget) }
		want, count := NewMask(t.vocab), 0
		for i := 1; i < n; i++ {
			if in(i) {
				for _, id := range t.nodeTokens(i) {
					want.Set(id)
					count++
				}
			}
		}
		if !slices.Equal(s.tokens, want) || s.count != count {
			return fmt.Errorf("%s, budget %d: %d tokens (count %d), want %d", name, budget, s.tokens.Count(), s.count, count)
		}
		for i := 1; i < n; i++ {
			every := true
			for j := i; j < int(t.nodes[i].end) && every; j++ {
				every = in(j)
			}
			if s.skips(i) != every {
				return fmt.Errorf("%s, budget %d: node %d (depth %d) skipped %v, every token below it in the slice %v", name, budget, i, t.nodes[i].depth, s.skips(i), every)
			}
		}
		return nil
	}
	if err := check("uncounted pass", flat.all, -1); err != nil {
		return err
	}
	for _, e := range []struct {
		name  string
		entry *sliceEntry
	}{{"counting pass", counted}, {"counting pass after the uncounted one", late}} {
		if err := check(e.name, e.entry.all, -1); err != nil {
			return err
		}
		for _, budget := range budgets {
			s := e.entry.all
			if budget < len(e.entry.budgets) || len(e.entry.budgets) >= manyUnits {
				s = t.budget(e.entry, min(budget, manyUnits-1))
			}
			if err := check(e.name, s, budget); err != nil {
				return err
			}
		}
	}
	for _, budget := range budgets {
		if a.Counted() { // and through the cache (a budget of every token's bytes needs no count)
			if err := check("Slice", t.Slice(a, budget), budget); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckNodeTokens checks that every token of tok's vocabulary with bytes ends at the node whose
// path spells them (nodeTokens, hasTok), and at no other node.
func (t *Trie) CheckNodeTokens(tok interface{ TokenBytes(core.TokenID) []byte }) error {
	seen := map[core.TokenID]bool{}
	path := make([]byte, t.maxLen+1)
	for i := 1; i < len(t.nodes); i++ {
		nd := &t.nodes[i]
		path[nd.depth] = nd.b
		ids := t.nodeTokens(i)
		if nd.hasTok != (len(ids) > 0) {
			return fmt.Errorf("node %d (%q): hasTok %v with %d tokens", i, path[1:nd.depth+1], nd.hasTok, len(ids))
		}
		for _, id := range ids {
			if b := tok.TokenBytes(id); string(b) != string(path[1:nd.depth+1]) || seen[id] {
				return fmt.Errorf("node %d (%q) holds token %d (%q), seen before: %v", i, path[1:nd.depth+1], id, b, seen[id])
			}
			seen[id] = true
		}
	}
	if len(seen) != len(t.tokens) {
		return fmt.Errorf("%d tokens at nodes, %d in the trie", len(seen), len(t.tokens))
	}
	return nil
}
