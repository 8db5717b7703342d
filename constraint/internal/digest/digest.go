// Package digest names large tables by 128 bits of their content, so that the constraint
// caches keyed by them (automata by their position automata, vocabulary slices by their
// automata's transitions) hold 16 bytes a key rather than a copy of the table: the keys of a
// Unicode class's automata ran to hundreds of kilobytes each, and building and keeping them
// was a sixth of what a process's first masks allocated and kept.
//
// A digest is two maphash sums of the content under seeds drawn once per process: equal
// content gives equal digests within a process, and different content collides with
// probability 2⁻¹²⁸ whatever the input, since the seeds are not known ahead. Digests are not
// stable across processes and are never stored.
package digest

import (
	"encoding/binary"
	"hash/maphash"
)

// Digest names content.
type Digest [16]byte

var seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// Hasher computes a Digest of what is written to it. The zero value is not ready: use New.
type Hasher struct {
	h   [2]maphash.Hash
	buf [512]byte
	n   int // bytes buffered in buf
}

// New returns a Hasher with nothing written.
func New() *Hasher {
	h := &Hasher{}
	h.h[0].SetSeed(seeds[0])
	h.h[1].SetSeed(seeds[1])
	return h
}

func (h *Hasher) flush() {
	h.h[0].Write(h.buf[:h.n])
	h.h[1].Write(h.buf[:h.n])
	h.n = 0
}

// String writes s.
func (h *Hasher) String(s string) {
	h.Uint64(uint64(len(s)))
	for len(s) > 0 {
		if h.n == len(h.buf) {
			h.flush()
		}
		k := copy(h.buf[h.n:], s)
		h.n += k
		s = s[k:]
	}
}

// Uint64 writes v.
func (h *Hasher) Uint64(v uint64) {
	if len(h.buf)-h.n < 8 {
		h.flush()
	}
	binary.LittleEndian.PutUint64(h.buf[h.n:], v)
	h.n += 8
}

// Uint64s writes xs, its length first.
func (h *Hasher) Uint64s(xs []uint64) {
	h.Uint64(uint64(len(xs)))
	for _, x := range xs {
		h.Uint64(x)
	}
}

// Uint16s writes xs, its length first.
func (h *Hasher) Uint16s(xs []uint16) {
	h.Uint64(uint64(len(xs)))
	for _, x := range xs {
		if len(h.buf)-h.n < 2 {
			h.flush()
		}
		binary.LittleEndian.PutUint16(h.buf[h.n:], x)
		h.n += 2
	}
}

// Sum returns the digest of everything written.
func (h *Hasher) Sum() Digest {
	h.flush()
	var d Digest
	binary.LittleEndian.PutUint64(d[:8], h.h[0].Sum64())
	binary.LittleEndian.PutUint64(d[8:], h.h[1].Sum64())
	return d
}

// Key returns the digest of everything written as a cache key of the given kind: the kind, a
// colon and the digest's 16 bytes.
func (h *Hasher) Key(kind string) string {
	d := h.Sum()
	return kind + ":" + string(d[:])
}
