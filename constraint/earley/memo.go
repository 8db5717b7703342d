package earley

import "slices"

// The memo's two tables start small (a clone advanced by a few bytes allocates little). The
// byte table is direct-mapped and doubles, emptied, each time it has taken twice its size in
// entries; the signature table doubles each time it is half full, keeping its entries, and an
// entry lives in one of memoProbe slots from its hash (linear probing). Up to 1<<memoBits and
// 1<<memoSigBits entries; past that an entry overwrites another, so memory stays bounded
// however long the output.
//
// The signature table was direct-mapped and ran at twice its size in entries: in a walk that
// builds a set per byte of a long token (inside a string of bounded length, where each
// character leaves a different state), the entries of the sets built for a run of spaces were
// overwritten before a run of dashes (whose bytes have the same signature) could reuse them,
// and each run built its own: 1 149 sets for the first mask of a string of at most 80
// characters on Llama 3's vocabulary, 172 now (77 for an unbounded string).
const (
	memoBits    = 14
	memoSigBits = 12
	memoMinBits = 8
	memoProbe   = 4
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
	byteFill          int // entries put in the byte table since it was made (or forgot)
	sigFill           int // entries held in the signature table
	// gen is the generation of the entries that count: forget moves to the next one.
	gen uint32
}

// forget drops every entry (in O(1): entries of an older generation do not count).
func (m *memo) forget() {
	m.gen++
	m.byteFill, m.sigFill = 0, 0
}

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
	mask := uint64(len(m.sigs) - 1)
	h := memoHash(parent, sig, m.sigBits)
	for j := range uint64(memoProbe) {
		e := &m.sigs[(h+j)&mask]
		if e.parent == 0 || e.gen != m.gen { // an empty slot ends the entry's slots
			return nil
		}
		if e.parent == parent && e.sig == sig && slices.Equal(e.wide, wide) {
			return e.child
		}
	}
	return nil
}

// put remembers child under (parent, sig, wide); wide is copied.
func (m *memo) put(parent, sig uint64, wide []uint64, child *set) {
	if m.sigs == nil || 2*m.sigFill >= len(m.sigs) && m.sigBits < memoSigBits {
		old := m.sigs
		m.sigBits = max(memoMinBits, m.sigBits+1)
		m.sigs, m.sigFill = make([]sigEntry, 1<<m.sigBits), 0
		for _, e := range old {
			if e.parent != 0 && e.gen == m.gen {
				m.putSig(e)
			}
		}
	}
	if wide != nil {
		wide = slices.Clone(wide)
	}
	m.putSig(sigEntry{parent: parent, gen: m.gen, sig: sig, wide: wide, child: child})
}

// putSig writes e in the first of its slots that is empty or of an older generation, or over
// the first when all hold others.
func (m *memo) putSig(e sigEntry) {
	mask := uint64(len(m.sigs) - 1)
	h := memoHash(e.parent, e.sig, m.sigBits)
	for j := range uint64(memoProbe) {
		if s := &m.sigs[(h+j)&mask]; s.parent == 0 || s.gen != m.gen {
			*s = e
			m.sigFill++
			return
		}
	}
	m.sigs[h] = e
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
	if m.bytes == nil || m.byteFill >= 2*len(m.bytes) && m.byteBits < memoBits {
		m.byteBits = max(memoMinBits, m.byteBits+1)
		m.bytes, m.byteFill = make([]byteEntry, 1<<m.byteBits), 0
	}
	m.byteFill++
	m.bytes[memoHash(parent, uint64(b), m.byteBits)] = byteEntry{parent: parent, b: b, gen: m.gen, child: child}
}
