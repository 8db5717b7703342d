package tokentrie

import "sync/atomic"

// ChildSlice is a Slice taken one byte below the root: for each first byte c, the tokens
// c·w of c's subtree whose rest w keeps the automaton alive from its start (any number of
// copies), and the nodes below c whose whole subtree is such tokens. A walk uses it when the
// recogniser, after c, may run a repetition that it could not run at the root — the rest of
// a property name once its first byte has ruled out the names it cannot be — and skips those
// subtrees as it skips a Slice's.
//
// Each first byte's part is built by a pass over that byte's subtree the first time a walk
// asks for it: a walk takes a child slice below the few first bytes where the parser starts
// the repetition, and a pass over every first byte's subtree (the whole trie) cost 4–8 ms on
// Llama 3's vocabulary for each new repetition.
type ChildSlice struct {
	t     *Trie
	a     Automaton
	parts [256]atomic.Pointer[childPart]
}

// childPart is a ChildSlice below one first byte, whose trie node is base−1.
type childPart struct {
	base int32    // the first node below the first byte
	skip []uint64 // bit i−base: every token in node i's subtree is alive (node i of depth ≥ 2)
	// The part's tokens, as the words of a vocabulary mask that hold any: bits[k] is word
	// words[k]. A walk that takes the part ORs them in: a first byte's tokens are thousands,
	// spread over the vocabulary's ids, and setting them one by one was a twentieth of the
	// masks' time over a corpus of schemas on Llama 3's vocabulary.
	words []int32
	bits  []uint64
	count int
}

// addTo adds the part's tokens to mask.
func (p *childPart) addTo(mask Mask) {
	for k, w := range p.words {
		mask[w] |= p.bits[k]
	}
}

// skips reports whether every token below node i (of depth ≥ 2, in the part's subtree) is in
// the part.
func (p *childPart) skips(i int) bool {
	j := i - int(p.base)
	return j >= 0 && j>>6 < len(p.skip) && p.skip[j>>6]&(1<<(j&63)) != 0
}

// part returns the slice below the first byte whose node is first (of depth 1), building it
// on first use (two walks racing may both build it; either result is the same).
func (s *ChildSlice) part(first int) *childPart {
	c := s.t.nodes[first].b
	if p := s.parts[c].Load(); p != nil {
		return p
	}
	p := s.t.newChildPart(s.a, first)
	s.parts[c].Store(p)
	return p
}

// ChildSlice returns a's child slice (unbounded), cached by a's key with the trie's slices;
// its parts are built as walks ask for them.
func (t *Trie) ChildSlice(a Automaton) *ChildSlice {
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	if s, ok := t.cache.children[a.Key()]; ok {
		return s
	}
	s := &ChildSlice{t: t, a: a}
	if t.cache.children == nil || len(t.cache.children) >= maxCachedSlices {
		t.cache.children = map[string]*ChildSlice{}
	}
	t.cache.children[a.Key()] = s
	return s
}

// newChildPart builds the part of a's child slice below the first-byte node first, in two
// passes over its subtree as newFlatSliceEntry's over the trie (the automaton starts again
// below the first byte): the first, in preorder, steps the automaton and notes each live and
// each rejected node, the second, in reverse, knows the first rejected node after each live
// one. A single pass that kept a path of open nodes, closing them as it left their subtrees,
// cost more in that bookkeeping than in stepping.
func (t *Trie) newChildPart(a Automaton, first int) *childPart {
	base, end := first+1, int(t.nodes[first].end)
	p := &childPart{base: int32(base), skip: make([]uint64, (end-base+63)/64)}
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	status := t.statusScratch()
	states := make([]uint32, t.maxLen+1)
	states[1] = a.Start()
	step := newStepper(a)
	lives := 0
	for i := base; i < end; i++ {
		nd := &t.nodes[i]
		d := int(nd.depth)
		var st uint32
		if step.trans != nil {
			st, _ = step.table(states[d-1], nd.b)
		} else {
			st, _ = step.Step(states[d-1], nd.b)
		}
		if st == 0 {
			status[i] = rejected
			i = int(nd.end) - 1 // the whole subtree is rejected
			continue
		}
		status[i] = live
		states[d] = st
		lives++
	}
	tokens := t.cache.partMask
	if len(tokens) != (t.vocab+63)/64 {
		tokens = NewMask(t.vocab)
		t.cache.partMask = tokens
	}
	next := int32(end) // the first rejected node after i
	for i := end - 1; i >= base; i-- {
		switch status[i] {
		case rejected:
			next = int32(i)
		case live:
			nd := &t.nodes[i]
			if next >= nd.end {
				j := i - base
				p.skip[j>>6] |= 1 << (j & 63)
			}
			if nd.hasTok {
				ids := t.nodeTokens(i)
				for _, id := range ids {
					tokens.Set(id)
				}
				p.count += len(ids)
			}
		default:
			continue
		}
		status[i] = unseen
	}
	for w, bits := range tokens {
		if bits != 0 {
			p.words = append(p.words, int32(w))
			p.bits = append(p.bits, bits)
			tokens[w] = 0 // the scratch is left empty
		}
	}
	return p
}
