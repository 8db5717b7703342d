package grammar

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestUTF8SequencesExhaustive checks, for a set of ranges, that the byte-range sequences
// match exactly the UTF-8 encodings of the code points in the range, over every code point.
func TestUTF8SequencesExhaustive(t *testing.T) {
	ranges := []RuneRange{
		{0, 0x10FFFF}, {'a', 'z'}, {0x70, 0x90}, {0x7FF, 0x800}, {0x3A5, 0x1234},
		{0xD000, 0xE100}, {0xFFFF, 0x10000}, {0x1F600, 0x1F64F}, {0x10000, 0x10FFFF}, {0x41, 0x41},
	}
	for _, r := range ranges {
		seqs := utf8Sequences(nil, r.Lo, r.Hi)
		for c := rune(0); c <= 0x10FFFF; c++ {
			if c >= 0xD800 && c <= 0xDFFF {
				continue
			}
			var buf [4]byte
			n := utf8.EncodeRune(buf[:], c)
			matches := 0
			for _, s := range seqs {
				if len(s) != n {
					continue
				}
				ok := true
				for i := range s {
					if buf[i] < s[i].lo || buf[i] > s[i].hi {
						ok = false
						break
					}
				}
				if ok {
					matches++
				}
			}
			want := 0
			if c >= r.Lo && c <= r.Hi {
				want = 1
			}
			if matches != want {
				t.Fatalf("range %X-%X: code point %X matched by %d sequences, want %d", r.Lo, r.Hi, c, matches, want)
			}
		}
	}
}

// TestUTF8AutomatonExhaustive checks utf8Automaton against the code points themselves: for
// classes of random ranges, strided ranges (upper and lower case letters alternating) and
// \p{Letter}, a walk of every code point's encoding ends exactly when the code point is in the
// class, every byte string of one to four bytes that is not such an encoding is rejected, each
// node's edges are disjoint and lead to distinct next nodes, and no two nodes are equal.
func TestUTF8AutomatonExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	classes := map[string][]RuneRange{
		"letters": runeSet(&Class{Ranges: tableRanges(unicode.Letter)}),
		"upper":   runeSet(&Class{Ranges: tableRanges(unicode.Lu)}),
		"all":     {{0, 0x10FFFF}},
		"none":    nil,
	}
	for k := range 6 {
		var rs []RuneRange
		for range 1 + rng.IntN(40) {
			lo := rune(rng.IntN(0x110000))
			if k%2 == 0 {
				lo = rune(rng.IntN(0x3000)) // dense in the two- and three-byte encodings
			}
			rs = append(rs, RuneRange{lo, min(0x10FFFF, lo+rune(rng.IntN(300)))})
		}
		classes[fmt.Sprintf("random%d", k)] = runeSet(&Class{Ranges: rs})
	}
	for name, rs := range classes {
		root := utf8Automaton(rs)
		in := func(c rune) bool {
			for _, r := range rs {
				if c >= r.Lo && c <= r.Hi {
					return true
				}
			}
			return false
		}
		// accepts walks b: the automaton ends the code point exactly at b's last byte.
		accepts := func(b []byte) bool {
			n := root
			for i, c := range b {
				var next *utf8Node
				found := false
				for _, e := range n.edges {
					for _, br := range e.ranges {
						if c >= br.lo && c <= br.hi {
							next, found = e.next, true
						}
					}
				}
				if !found {
					return false
				}
				if next == nil {
					return i == len(b)-1
				}
				n = next
			}
			return false
		}
		for c := rune(0); c <= 0x10FFFF; c++ {
			if c >= 0xD800 && c <= 0xDFFF {
				continue
			}
			if got, want := accepts(utf8.AppendRune(nil, c)), in(c); got != want {
				t.Fatalf("%s: U+%04X accepted %v, in the class %v", name, c, got, want)
			}
		}
		for range 200000 {
			b := make([]byte, 1+rng.IntN(4))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			r, size := utf8.DecodeRune(b)
			want := size == len(b) && r != utf8.RuneError && in(r)
			if got := accepts(b); got != want {
				t.Fatalf("%s: % x accepted %v, want %v", name, b, got, want)
			}
		}
		seen := map[*utf8Node]bool{}
		keys := map[string]bool{}
		var check func(n *utf8Node)
		check = func(n *utf8Node) {
			if n == nil || seen[n] {
				return
			}
			seen[n] = true
			var covered ByteSet
			nexts := map[*utf8Node]bool{}
			key := ""
			for _, e := range n.edges {
				s := byteSet(e.ranges)
				for c := range 256 {
					if s.Has(byte(c)) && covered.Has(byte(c)) {
						t.Fatalf("%s: two edges of a node take byte %#x", name, c)
					}
				}
				covered.Union(&s)
				if nexts[e.next] {
					t.Fatalf("%s: two edges of a node lead to the same node", name)
				}
				nexts[e.next] = true
				key += fmt.Sprintf("%v>%p;", e.ranges, e.next)
				check(e.next)
			}
			if keys[key] {
				t.Fatalf("%s: two equal nodes", name)
			}
			keys[key] = true
		}
		check(root)
		t.Logf("%s: %d ranges, %d nodes", name, len(rs), len(seen))
	}
}

// tableRanges returns the code points of tab as ranges of single code points where its
// ranges are strided.
func tableRanges(tab *unicode.RangeTable) []RuneRange {
	var out []RuneRange
	add := func(lo, hi, stride rune) {
		if stride == 1 {
			out = append(out, RuneRange{lo, hi})
			return
		}
		for c := lo; c <= hi; c += stride {
			out = append(out, RuneRange{c, c})
		}
	}
	for _, r := range tab.R16 {
		add(rune(r.Lo), rune(r.Hi), rune(r.Stride))
	}
	for _, r := range tab.R32 {
		add(rune(r.Lo), rune(r.Hi), rune(r.Stride))
	}
	return out
}
