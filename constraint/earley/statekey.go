package earley

import "math"

// AppendStateKey appends to dst a key of the parser's current state: two matchers (of the
// same grammar) with equal keys accept exactly the same continuations, whatever their
// positions. The key lists the last set's scan and wait items and Leo entries with each
// origin written as "this set" or as the position and identity of the set it names (a set
// below the last one is shared, never changed, and fixes the chart beneath it), and whether
// the set accepts and is the first. A waiting item whose nonterminal has a Leo entry in the
// set is left out: completing that nonterminal takes the entry, never the item. Inside a JSON
// string, say, the states after each character have equal keys. Sets of equal content built
// in different orders may get different keys; equal keys never mean different states.
func (m *Matcher) AppendStateKey(dst []byte) []byte { return m.appendKey(dst, nil) }

// AppendStateKeyWithin is AppendStateKey for the next horizon bytes only: two matchers with
// equal keys accept the same continuations of up to horizon bytes (longer ones may differ).
// It tells apart fewer states: inside a bounded repetition such as a string of at most 500
// characters, the states after each character differ only in how many copies may still
// come, and while that is more than horizon the keys are equal. A token mask, which looks at
// most one token's bytes ahead, can be shared by all of them (horizon: the longest token). A
// negative horizon counts as 0.
func (m *Matcher) AppendStateKeyWithin(dst []byte, horizon int) []byte {
	return m.appendKey(dst, m.grammarRuns().canonWithin(max(horizon, 0)))
}

// appendKey writes the key of AppendStateKey, with the nonterminals and productions of the
// items predicted in the last set and of its Leo entries replaced through c (nil: kept).
func (m *Matcher) appendKey(dst []byte, c *keyCanon) []byte {
	return m.appendKeyAt(dst, c, int32(len(m.sets)-1))
}

// appendKeyAt is appendKey for the set at position k, as the state the parser would be in if
// it were the last.
func (m *Matcher) appendKeyAt(dst []byte, c *keyCanon, k int32) []byte {
	s := m.sets[k]
	u32 := func(v uint32) { dst = append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
	origin := func(o int32) {
		if o == k {
			u32(math.MaxUint32)
			return
		}
		u32(uint32(o))
		id := m.sets[o].id
		u32(uint32(id))
		u32(uint32(id >> 32))
	}
	prod := func(p, o int32) int32 { // an item's production; only those predicted here move
		if c != nil && o == k {
			return c.prod[p]
		}
		return p
	}
	flags := uint32(0)
	if s.accept {
		flags |= 1
	}
	if k == 0 {
		flags |= 2
	}
	u32(flags)
	u32(uint32(len(s.scan)))
	waitAt := len(dst) // the count of waiting items kept, written once they are
	u32(0)
	u32(uint32(len(s.leo)))
	wait := uint32(0)
	for l, list := range [2][]int32{s.scan, s.wait} {
		for _, i := range list {
			it := &s.items[i]
			if l == 1 {
				if _, ok := s.leoFor(int32(it.next)); ok { // a Leo entry makes its completion
					continue
				}
				wait++
			}
			u32(uint32(prod(it.prod, it.origin)))
			u32(uint32(it.dot))
			origin(it.origin)
		}
	}
	dst[waitAt], dst[waitAt+1], dst[waitAt+2], dst[waitAt+3] = byte(wait), byte(wait>>8), byte(wait>>16), byte(wait>>24)
	for _, e := range s.leo {
		nt := e.nt
		if c != nil {
			nt = c.nt[nt]
		}
		u32(uint32(nt))
		u32(uint32(e.prod))
		origin(e.origin)
	}
	return dst
}

// keyCanon maps nonterminals and productions to those a key within horizon bytes writes
// (AppendStateKeyWithin): a link of a bounded repetition's chain opt_n → ε | X opt_{n-1}
// with more than horizon+1 copies left maps to the link of the same chain with horizon+1
// left, and its two productions to that link's; everything else to itself. Within horizon
// bytes no more than horizon copies are taken (each takes a byte at least, or may be left
// out), so such links accept the same continuations.
type keyCanon struct {
	horizon  int
	nt, prod []int32
	moves    bool // some link is mapped to another
}

// movesAny reports whether c maps the production of an item of set s, at position k, that was
// predicted there, or the nonterminal of one of its Leo entries: otherwise s's key within the
// horizon is its exact key.
func (c *keyCanon) movesAny(s *set, k int32) bool {
	if !c.moves {
		return false
	}
	for _, list := range [2][]int32{s.scan, s.wait} {
		for _, i := range list {
			if it := &s.items[i]; it.origin == k && c.prod[it.prod] != int32(it.prod) {
				return true
			}
		}
	}
	for _, e := range s.leo {
		if c.nt[e.nt] != int32(e.nt) {
			return true
		}
	}
	return false
}

// canonWithin returns the grammar's keyCanon for horizon, made on first use (the last one is
// kept: a processor asks with one vocabulary's longest token).
func (r *grammarRuns) canonWithin(horizon int) *keyCanon {
	if c := r.canon.Load(); c != nil && c.horizon == horizon {
		return c
	}
	g := r.g
	c := &keyCanon{horizon: horizon, nt: make([]int32, len(g.Names)), prod: make([]int32, len(g.Prods))}
	for n := range c.nt {
		c.nt[n] = int32(n)
	}
	for p := range c.prod {
		c.prod[p] = int32(p)
	}
	// link reports whether n is a chain link opt_b → ε | X opt_{b-1} (b ≥ 2), and returns its
	// successor and the indices in ByLHS[n] of its empty and its X opt_{b-1} production.
	link := func(n int32) (next int32, empty, more int, ok bool) {
		prods := g.ByLHS[n]
		if len(prods) != 2 || r.bound[n] < 2 {
			return 0, 0, 0, false
		}
		empty, more = 0, 1
		if len(g.Prods[prods[0]].RHS) != 0 {
			empty, more = 1, 0
		}
		rhs := g.Prods[prods[more]].RHS
		if len(g.Prods[prods[empty]].RHS) != 0 || len(rhs) != 2 || rhs[1].IsTerminal() || r.bound[rhs[1]] != r.bound[n]-1 {
			return 0, 0, 0, false
		}
		return int32(rhs[1]), empty, more, true
	}
	// to[n]: the link with horizon+1 copies left below link n, or -1 when the chain leaves
	// links before (-2: not known yet); one pass down each chain, remembered for the links
	// above.
	to := make([]int32, len(g.Names))
	for n := range to {
		to[n] = -2
	}
	var target func(n int32) int32
	target = func(n int32) int32 {
		if to[n] != -2 {
			return to[n]
		}
		t := int32(-1)
		if next, _, _, ok := link(n); ok {
			if r.bound[n] == horizon+1 {
				t = n
			} else if r.bound[n] > horizon+1 {
				t = target(next)
			}
		}
		to[n] = t
		return t
	}
	for n := range c.nt {
		if horizon < 1 || r.bound[n] <= horizon+1 {
			continue
		}
		_, e1, m1, ok := link(int32(n))
		if !ok {
			continue
		}
		t := target(int32(n))
		if t < 0 {
			continue
		}
		_, e2, m2, _ := link(t)
		c.nt[n], c.moves = t, true
		c.prod[g.ByLHS[n][e1]] = g.ByLHS[t][e2]
		c.prod[g.ByLHS[n][m1]] = g.ByLHS[t][m2]
	}
	r.canon.Store(c)
	return c
}
