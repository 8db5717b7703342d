package earley

// Leo's optimisation makes right recursion cost constant work per byte. When a set holds
// exactly one item waiting for nonterminal A, and A is the last symbol of that item's
// production (B → β • A, from set i), completing A at this set can only complete that item,
// whose completion of B at set i is in turn deterministic or not. The chain of such
// completions is followed once, when the set is built, and its last item recorded: a later
// completion of A here adds that item directly instead of one item per level of recursion.

// leoItem is a completed item (the dot at the end of prod), started at origin, that
// completing nt at the set holding the entry yields.
type leoItem struct {
	nt     int32
	prod   int32
	origin int32
}

// maxLeoWait bounds the waiting items a set may have for its Leo entries to be computed
// (the uniqueness check is quadratic in them).
const maxLeoWait = 32

func (s *set) leoFor(nt int32) (leoItem, bool) {
	for _, e := range s.leo {
		if e.nt == nt {
			return e, true
		}
	}
	return leoItem{}, false
}

// computeLeo records the Leo entries of set s, at chart index k, once its items are final.
// Entries first point at their direct parent item; chains are then followed through this
// set's own entries (items predicted here) and the finished entries of earlier sets.
func (m *Matcher) computeLeo(s *set, k int32) {
	if len(s.wait) > maxLeoWait {
		return
	}
	m.sc.leoBuild = m.sc.leoBuild[:0]
	s.leo = nil
	g := m.g
	for a, wi := range s.wait {
		w := &s.items[wi]
		unique := true
		for b, wj := range s.wait {
			if a != b && s.items[wj].next == w.next {
				unique = false
				break
			}
		}
		if unique && int(w.dot) == len(g.Prods[w.prod].RHS)-1 {
			m.sc.leoBuild = append(m.sc.leoBuild, leoItem{nt: int32(w.next), prod: w.prod, origin: w.origin})
		}
	}
	if len(m.sc.leoBuild) == 0 {
		return
	}
	m.keepLeo(s)
	m.sc.leo = append(m.sc.leo[:0], s.leo...)
	direct := m.sc.leo
	for i := range s.leo {
		top := direct[i]
		// At most len(direct) steps inside this set: unit cycles (A ::= B, B ::= A) stop.
		for range len(direct) + 1 {
			lhs := g.Prods[top.prod].LHS
			if top.origin < k {
				if deeper, ok := m.sets[top.origin].leoFor(lhs); ok {
					top.prod, top.origin = deeper.prod, deeper.origin
				}
				break
			}
			next, ok := findLeo(direct, lhs)
			if !ok {
				break
			}
			top.prod, top.origin = next.prod, next.origin
		}
		s.leo[i].prod, s.leo[i].origin = top.prod, top.origin
	}
}

func findLeo(entries []leoItem, nt int32) (leoItem, bool) {
	for _, e := range entries {
		if e.nt == nt {
			return e, true
		}
	}
	return leoItem{}, false
}
