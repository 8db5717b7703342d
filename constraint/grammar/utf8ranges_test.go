package grammar

import (
	"testing"
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
