package earley

// memoWays is the number of (parent, signature) → set entries kept per chart position.
const memoWays = 4

// memoRows bounds the memo: position k uses row k mod memoRows. Parent ids are unique, so a
// row left by another position only misses; memory stays bounded however long the output.
const memoRows = 128

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
	// bytes[b] is the set built from the set numbered parent by byte b: the first level,
	// which needs no signature.
	parent uint64
	bytes  *[256]*set
}

type memoEntry struct {
	parent uint64
	sig    uint64
	child  *set
}

func (m *memo) get(k int, parent, sig uint64) *set {
	if m.rows == nil {
		return nil
	}
	r := &m.rows[k%memoRows]
	for i := range r.entries {
		e := &r.entries[i]
		if e.child != nil && e.parent == parent && e.sig == sig {
			return e.child
		}
	}
	return nil
}

func (m *memo) put(k int, parent, sig uint64, child *set) {
	r := m.row(k)
	r.entries[r.next] = memoEntry{parent: parent, sig: sig, child: child}
	r.next = (r.next + 1) % memoWays
}

func (m *memo) byByte(k int, parent uint64, b byte) *set {
	if m.rows == nil {
		return nil
	}
	r := &m.rows[k%memoRows]
	if r.parent != parent || r.bytes == nil {
		return nil
	}
	return r.bytes[b]
}

func (m *memo) putByte(k int, parent uint64, b byte, child *set) {
	r := m.row(k)
	if r.bytes == nil {
		r.bytes = new([256]*set)
	}
	if r.parent != parent {
		clear(r.bytes[:])
		r.parent = parent
	}
	r.bytes[b] = child
}

func (m *memo) row(k int) *memoRow {
	if m.rows == nil {
		m.rows = make([]memoRow, memoRows)
	}
	return &m.rows[k%memoRows]
}
