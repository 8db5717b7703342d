package earley

// scratch holds the per-set deduplication tables of a matcher, reused from set to set. Stamps
// avoid clearing: an entry belongs to the current set only if its stamp is the current one.
type scratch struct {
	stamp uint32
	// predicted[nt] == stamp when nt was predicted in the current set.
	predictedAt []uint32
	// An open-addressing hash set of the current set's items.
	slots  []slot
	filled int
	// leo holds a set's direct Leo entries while their chains are followed.
	leo []leoItem
	// items is the buffer a set's items are gathered in while it is built.
	items []item
	// leoBuild gathers a set's Leo entries before they move to the set's storage.
	leoBuild []leoItem
	// sig is the wide signature of the byte being advanced (Advance).
	sig []uint64
}

type slot struct {
	stamp uint32
	it    item
}

// begin starts a new set over a grammar with n nonterminals.
func (sc *scratch) begin(n int) {
	sc.stamp++
	if sc.stamp == 0 { // wrapped: clear everything once
		clear(sc.predictedAt)
		clear(sc.slots)
		sc.stamp = 1
	}
	if len(sc.predictedAt) < n {
		sc.predictedAt = make([]uint32, n)
	}
	if sc.slots == nil {
		sc.slots = make([]slot, 64)
	}
	sc.filled = 0
}

func (sc *scratch) isPredicted(nt int32) bool { return sc.predictedAt[nt] == sc.stamp }

func (sc *scratch) predicted(nt int32) { sc.predictedAt[nt] = sc.stamp }

func hashItem(it item) uint32 {
	h := uint32(it.prod)*0x9E3779B1 ^ uint32(it.dot)*0x85EBCA77 ^ uint32(it.origin)*0xC2B2AE3D
	return h ^ h>>15
}

// add appends it to s unless s already holds it.
func (sc *scratch) add(s *set, it item) {
	if 2*(sc.filled+1) > len(sc.slots) {
		sc.grow(s)
	}
	mask := uint32(len(sc.slots) - 1)
	for i := hashItem(it) & mask; ; i = (i + 1) & mask {
		sl := &sc.slots[i]
		if sl.stamp != sc.stamp {
			sl.stamp = sc.stamp
			sl.it = it
			sc.filled++
			s.items = append(s.items, it)
			return
		}
		if sl.it.prod == it.prod && sl.it.dot == it.dot && sl.it.origin == it.origin {
			return
		}
	}
}

// grow doubles the table and reinserts the items of s (the current set).
func (sc *scratch) grow(s *set) {
	sc.slots = make([]slot, 2*len(sc.slots))
	mask := uint32(len(sc.slots) - 1)
	for _, it := range s.items {
		i := hashItem(it) & mask
		for sc.slots[i].stamp == sc.stamp {
			i = (i + 1) & mask
		}
		sc.slots[i] = slot{stamp: sc.stamp, it: it}
	}
}
