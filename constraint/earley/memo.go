package earley

import "slices"

// The memo's two direct-mapped tables start small (a clone advanced by a few bytes allocates
// little) and double, emptied, each time they have taken twice their size in entries, up to
// 1<<memoBits and 1<<memoSigBits entries; entries are overwritten on collision, so memory
// stays bounded however long the output.
const (
	memoBits     = 14
	memoSigBits  = 12
	memoMinBits  = 8
	memoGrowthOf = 2
)

// memo remembers the sets recently built from a parent set: by the byte that was advanced
// (the first level, which needs no signature) and by the byte's signature (the scan items it
// matches; bytes with the same signature after the same set give the same set). Set ids are
// unique among all sets ever built, so an entry is valid wherever its parent is on top. It
// belongs to one Matcher; the sets it holds are immutable, and recycled only after forget.
type memo struct {
	bytes             []byteEntry
	sigs              []sigEntry
	byteBits, sigBits uint
	byteFill, sigFill int // entries put since the table was made
	// gen is the generation of the entries that count: forget moves to the next one.
	gen uint32
}

// forget drops every entry (in O(1): entries of an older generation do not count).
func (m *memo) forget() { m.gen++ }

type byteEntry struct {
	parent uint64 // 0: empty (set ids start at 1)
	b      byte
	gen    uint32
	child  *set
}

type sigEntry struct {
	parent uint64
	gen    uint32
	sig    uint64
	wide   []uint64 // the whole signature when the parent has more than 64 scan items
	child  *set
}

func memoHash(parent, x uint64, bits uint) uint64 {
	return ((parent * 0x9E3779B97F4A7C15) ^ (x * 0xC2B2AE3D27D4EB4F)) * 0x94D049BB133111EB >> (64 - bits)
}

func (m *memo) get(parent, sig uint64, wide []uint64) *set {
	if m.sigs == nil {
		return nil
	}
	if e := &m.sigs[memoHash(parent, sig, m.sigBits)]; e.parent == parent && e.gen == m.gen && e.sig == sig && slices.Equal(e.wide, wide) {
		return e.child
	}
	return nil
}

// put remembers child under (parent, sig, wide); wide is copied.
func (m *memo) put(parent, sig uint64, wide []uint64, child *set) {
	if m.sigs == nil || m.sigFill >= memoGrowthOf*len(m.sigs) && m.sigBits < memoSigBits {
		m.sigBits = max(memoMinBits, m.sigBits+1)
		m.sigs, m.sigFill = make([]sigEntry, 1<<m.sigBits), 0
	}
	m.sigFill++
	if wide != nil {
		wide = slices.Clone(wide)
	}
	m.sigs[memoHash(parent, sig, m.sigBits)] = sigEntry{parent: parent, gen: m.gen, sig: sig, wide: wide, child: child}
}

func (m *memo) byByte(parent uint64, b byte) *set {
	if m.bytes == nil {
		return nil
	}
	if e := &m.bytes[memoHash(parent, uint64(b), m.byteBits)]; e.parent == parent && e.gen == m.gen && e.b == b {
		return e.child
	}
	return nil
}

func (m *memo) putByte(parent uint64, b byte, child *set) {
	if m.bytes == nil || m.byteFill >= memoGrowthOf*len(m.bytes) && m.byteBits < memoBits {
		m.byteBits = max(memoMinBits, m.byteBits+1)
		m.bytes, m.byteFill = make([]byteEntry, 1<<m.byteBits), 0
	}
	m.byteFill++
	m.bytes[memoHash(parent, uint64(b), m.byteBits)] = byteEntry{parent: parent, b: b, gen: m.gen, child: child}
}
