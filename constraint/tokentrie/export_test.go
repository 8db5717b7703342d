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
	flat, counted := t.newFlatSliceEntry(a, nil), t.newSliceEntry(a)
	late := t.newFlatSliceEntry(a, nil) // counted after its unbounded slice, as Slice does for a later budget
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

// CheckShadow builds a's unbounded slice in the shadow of base's (newShadow) and compares it
// with a's plain pass (which CheckPasses checks against a recomputation): the same tokens,
// count and skipped subtrees. It reports whether a shadow was made and how many trie nodes
// its first pass left in step.
func (t *Trie) CheckShadow(a, base Automaton) (shadowed bool, inStepNodes int, err error) {
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	var r reducer
	m, err := r.minimalOf(a)
	if err != nil {
		return false, 0, err
	}
	bm, err := r.minimalOf(base)
	if err != nil {
		return false, 0, err
	}
	plain := t.newFlatSliceEntry(a, nil).all
	sh, ok := r.newShadow(m, bm, t.newFlatSliceEntry(base, nil).all)
	if !ok {
		return false, 0, nil
	}
	status := t.statusScratch()
	t.shadowPass(sh, status)
	for _, s := range status {
		if s == inStep {
			inStepNodes++
		}
	}
	clear(status)
	got := t.newFlatSliceEntry(a, sh).all
	if !slices.Equal(got.tokens, plain.tokens) || got.count != plain.count {
		return true, inStepNodes, fmt.Errorf("in the shadow: %d tokens (count %d), the plain pass %d (count %d)", got.tokens.Count(), got.count, plain.tokens.Count(), plain.count)
	}
	for i := 1; i < len(t.nodes); i++ {
		if got.skips(i) != plain.skips(i) {
			return true, inStepNodes, fmt.Errorf("in the shadow: node %d (depth %d) skipped %v, in the plain pass %v", i, t.nodes[i].depth, got.skips(i), plain.skips(i))
		}
	}
	return true, inStepNodes, nil
}

// SliceTokens returns s's token set.
func SliceTokens(s *Slice) Mask { return s.tokens }

// SameLanguage reports whether a and b have the same languageKey (false past
// maxLanguageStates states).
func SameLanguage(a, b Automaton) bool {
	var r reducer
	ma, err := r.minimalOf(a)
	if err != nil {
		return false
	}
	mb, err := r.minimalOf(b)
	return err == nil && ma.languageKey() == mb.languageKey()
}

// minimalOf returns a's minimal automaton, or an error past maxLanguageStates states.
func (r *reducer) minimalOf(a Automaton) (*dfa, error) {
	d, ok := r.reachable(a, maxLanguageStates)
	if !ok {
		return nil, fmt.Errorf("%s: more than %d states", a.Key(), maxLanguageStates)
	}
	return r.minimal(d), nil
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

// ReduceSteps are the steps of a new unbounded slice in a shadow, for a benchmark to time
// one by one (both automata within maxLanguageStates states). The passes hold the slice
// cache's lock, whose scratch they use, as Slice does.
func (t *Trie) ReduceSteps(a, base Automaton) (map[string]func(), error) {
	var r reducer
	bm, err := r.minimalOf(base)
	if err != nil {
		return nil, err
	}
	m, err := r.minimalOf(a)
	if err != nil {
		return nil, err
	}
	locked := func(f func()) func() {
		return func() {
			t.cache.mu.Lock()
			defer t.cache.mu.Unlock()
			f()
		}
	}
	var bs *Slice
	locked(func() { bs = t.newFlatSliceEntry(base, nil).all })()
	sh, _ := r.newShadow(m, bm, bs)
	var r2 reducer
	return map[string]func(){
		"reachable":   func() { r2.reachable(a, maxLanguageStates) },
		"minimal":     func() { d, _ := r2.reachable(a, maxLanguageStates); r2.minimal(d) },
		"languageKey": func() { m.languageKey() },
		"newShadow":   func() { r2.newShadow(m, bm, bs) },
		"shadowPass":  locked(func() { t.newFlatSliceEntry(a, sh) }),
		"plainPass":   locked(func() { t.newFlatSliceEntry(a, nil) }),
	}, nil
}

// BuildChildParts builds a's child slice parts below every first byte afresh.
func (t *Trie) BuildChildParts(a Automaton) int {
	n := 0
	for i := 1; i < len(t.nodes); i = int(t.nodes[i].end) {
		n += t.newChildPart(a, i).count
	}
	return n
}

// BuildSlice builds a's slice within budget (budget < 0: unbounded) with fresh passes over the
// trie, as Slice does for an automaton it has not met, but never takes a built slice of the
// same language or builds in one's shadow: every call of a benchmark makes the passes.
func (t *Trie) BuildSlice(a Automaton, budget int) *Slice {
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	if budget < 0 {
		return t.newFlatSliceEntry(a, nil).all
	}
	e := t.newSliceEntry(a)
	if budget >= len(e.budgets) {
		return e.all
	}
	return t.budget(e, budget)
}
