package tokentrie

import "slices"

// FlatAndPathSlices returns a's unbounded slice as newFlatSliceEntry makes it and as
// newCountedSliceEntry (a path of open nodes) does, for tests that compare them.
func (t *Trie) FlatAndPathSlices(a Automaton) (flat, path *Slice) {
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	return t.newFlatSliceEntry(a).all, t.newCountedSliceEntry(a).all
}

// SameSlices reports whether two slices have the same tokens, count and skipped subtrees.
func SameSlices(a, b *Slice) bool {
	return a.count == b.count && slices.Equal(a.tokens, b.tokens) && slices.Equal(a.skip, b.skip)
}
