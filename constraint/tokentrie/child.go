package tokentrie

import "github.com/loomlm/loom/core"

// ChildSlice is a Slice taken one byte below the root: for each first byte c, the tokens
// c·w of c's subtree whose rest w keeps the automaton alive from its start (any number of
// copies), and the nodes below c whose whole subtree is such tokens. A walk uses it when the
// recogniser, after c, may run a repetition that it could not run at the root — the rest of
// a property name once its first byte has ruled out the names it cannot be — and skips those
// subtrees as it skips a Slice's.
type ChildSlice struct {
	skip []uint64 // bit i (a node of depth ≥ 2): every token in node i's subtree is alive
	ids  []core.TokenID
	lo   [257]int32 // ids[lo[c]:lo[c+1]]: the alive tokens below first byte c (depth ≥ 2)
}

// skips reports whether every token below node i (of depth ≥ 2) is in the slice.
func (s *ChildSlice) skips(i int) bool { return s.skip[i>>6]&(1<<(i&63)) != 0 }

// tokens returns the slice's tokens below first byte c.
func (s *ChildSlice) tokens(c byte) []core.TokenID { return s.ids[s.lo[c]:s.lo[int(c)+1]] }

// ChildSlice returns a's child slice (unbounded), built by one pass over the trie on first
// use and cached by a's key with the trie's slices.
func (t *Trie) ChildSlice(a Automaton) *ChildSlice {
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	if s, ok := t.cache.children[a.Key()]; ok {
		return s
	}
	s := t.newChildSlice(a)
	if t.cache.children == nil || len(t.cache.children) >= maxCachedSlices {
		t.cache.children = map[string]*ChildSlice{}
	}
	t.cache.children[a.Key()] = s
	return s
}

func (t *Trie) newChildSlice(a Automaton) *ChildSlice {
	s := &ChildSlice{skip: make([]uint64, (len(t.nodes)+63)/64)}
	// One pass in preorder, as newSliceEntry: dead[k] says a rejected node lies below the live
	// node of depth k+2 on the current path (the automaton starts again below each first byte).
	var open []int32
	var dead []bool
	closeTo := func(depth int) { // leave the subtrees of the open nodes deeper than depth
		for len(open) > max(depth-1, 0) {
			n := len(open) - 1
			if !dead[n] {
				s.skip[open[n]>>6] |= 1 << (open[n] & 63)
			}
			if n > 0 {
				dead[n-1] = dead[n-1] || dead[n]
			}
			open, dead = open[:n], dead[:n]
		}
	}
	states := make([]uint32, t.maxLen+1)
	first := -1
	for i := 1; i < len(t.nodes); i++ {
		nd := &t.nodes[i]
		d := int(nd.depth)
		closeTo(d - 1)
		if d == 1 {
			for c := first + 1; c <= int(nd.b); c++ {
				s.lo[c] = int32(len(s.ids))
			}
			first = int(nd.b)
			states[1] = a.Start()
			continue
		}
		st, _ := a.Step(states[d-1], nd.b) // the parent is live: dead subtrees are skipped
		if st == 0 {
			if n := len(open); n > 0 {
				dead[n-1] = true
			}
			i = int(nd.end) - 1 // the whole subtree is rejected
			continue
		}
		states[d] = st
		open, dead = append(open, int32(i)), append(dead, false)
		s.ids = append(s.ids, t.tokens[nd.tokLo:nd.tokHi]...)
	}
	closeTo(0)
	for c := first + 1; c <= 256; c++ {
		s.lo[c] = int32(len(s.ids))
	}
	return s
}
