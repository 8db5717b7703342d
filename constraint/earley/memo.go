package earley

// memoWays is the number of (parent, signature) → set entries kept per chart position.
const memoWays = 4

// memo remembers, per chart position, the sets recently built from a set there, keyed by the
// parent set's id and the byte's signature (the scan items it matches). It belongs to one
// Matcher; the sets it holds are immutable and pinned (never recycled), so they may be pushed
// again anywhere the same parent is on top.
type memo struct {
	rows []memoRow
}

type memoRow struct {
	entries [memoWays]memoEntry
	next    int
}

type memoEntry struct {
	parent uint64
	sig    uint64
	child  *set
}

func (m *memo) get(k int, parent, sig uint64) *set {
	if k >= len(m.rows) {
		return nil
	}
	for i := range m.rows[k].entries {
		e := &m.rows[k].entries[i]
		if e.child != nil && e.parent == parent && e.sig == sig {
			return e.child
		}
	}
	return nil
}

func (m *memo) put(k int, parent, sig uint64, child *set) {
	for k >= len(m.rows) {
		m.rows = append(m.rows, memoRow{})
	}
	r := &m.rows[k]
	r.entries[r.next] = memoEntry{parent: parent, sig: sig, child: child}
	r.next = (r.next + 1) % memoWays
}
