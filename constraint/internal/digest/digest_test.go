package digest

import (
	"encoding/binary"
	"hash/maphash"
	"math/rand/v2"
	"testing"
)

// TestDigestMatchesSerialisation checks a Hasher against its definition, recomputed from
// scratch: the two seeded maphash sums of the content serialised whole (lengths first, little
// endian), for random writes of every kind and of lengths that cross the buffer's end.
func TestDigestMatchesSerialisation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		h := New()
		var ser []byte
		for range 1 + rng.IntN(6) {
			switch rng.IntN(4) {
			case 0:
				xs := make([]uint16, rng.IntN(1200))
				for i := range xs {
					xs[i] = uint16(rng.Uint32())
				}
				h.Uint16s(xs)
				ser = binary.LittleEndian.AppendUint64(ser, uint64(len(xs)))
				for _, x := range xs {
					ser = binary.LittleEndian.AppendUint16(ser, x)
				}
			case 1:
				xs := make([]uint64, rng.IntN(300))
				for i := range xs {
					xs[i] = rng.Uint64()
				}
				h.Uint64s(xs)
				ser = binary.LittleEndian.AppendUint64(ser, uint64(len(xs)))
				for _, x := range xs {
					ser = binary.LittleEndian.AppendUint64(ser, x)
				}
			case 2:
				b := make([]byte, rng.IntN(2000))
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				h.String(string(b))
				ser = binary.LittleEndian.AppendUint64(ser, uint64(len(b)))
				ser = append(ser, b...)
			case 3:
				v := rng.Uint64()
				h.Uint64(v)
				ser = binary.LittleEndian.AppendUint64(ser, v)
			}
		}
		var want Digest
		binary.LittleEndian.PutUint64(want[:8], maphash.Bytes(seeds[0], ser))
		binary.LittleEndian.PutUint64(want[8:], maphash.Bytes(seeds[1], ser))
		if got := h.Sum(); got != want {
			t.Fatalf("trial %d: digest %x, its serialisation's %x", trial, got, want)
		}
	}
}

// TestDigestSeparatesWrites checks that writes are delimited (lengths come first) and that
// tables differing in one entry differ.
func TestDigestSeparatesWrites(t *testing.T) {
	sum := func(write func(h *Hasher)) Digest {
		h := New()
		write(h)
		return h.Sum()
	}
	if sum(func(h *Hasher) { h.String("ab"); h.String("c") }) == sum(func(h *Hasher) { h.String("a"); h.String("bc") }) {
		t.Error(`"ab","c" and "a","bc" have one digest`)
	}
	if sum(func(h *Hasher) { h.Uint16s([]uint16{1, 2}); h.Uint16s(nil) }) == sum(func(h *Hasher) { h.Uint16s([]uint16{1}); h.Uint16s([]uint16{2}) }) {
		t.Error("[1 2],[] and [1],[2] have one digest")
	}
	table := make([]uint16, 64*256)
	seen := map[Digest]int{}
	for i := range table {
		table[i]++
		d := sum(func(h *Hasher) { h.Uint16s(table) })
		if j, ok := seen[d]; ok {
			t.Fatalf("tables %d and %d have one digest", j, i)
		}
		seen[d] = i
		table[i]--
	}
	if sum(func(h *Hasher) { h.Uint16s(table) }) != sum(func(h *Hasher) { h.Uint16s(append([]uint16(nil), table...)) }) {
		t.Error("equal tables have different digests")
	}
}

// TestKey checks that a key is its kind, a colon and the digest, so that kinds keep equal
// tables of different automata apart.
func TestKey(t *testing.T) {
	h := New()
	h.Uint16s([]uint16{1, 2, 3})
	d := h.Sum()
	h2 := New()
	h2.Uint16s([]uint16{1, 2, 3})
	if got, want := h2.Key("union"), "union:"+string(d[:]); got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}
