package grammar

import "unicode/utf8"

// byteRange is an inclusive range of byte values.
type byteRange struct{ lo, hi byte }

// utf8Sequences appends to out the byte-range sequences whose concatenations are exactly the
// UTF-8 encodings of the code points in [lo, hi] (surrogates excluded). Each sequence has the
// length of the encodings it matches, and every position is a range of bytes, so a code point
// class becomes a small set of byte-level sequences.
func utf8Sequences(out [][]byteRange, lo, hi rune) [][]byteRange {
	if lo > hi {
		return out
	}
	// Split around the surrogates, then at the boundaries of encoding lengths.
	if lo <= 0xDFFF && hi >= 0xD800 {
		out = utf8Sequences(out, lo, 0xD7FF)
		return utf8Sequences(out, 0xE000, hi)
	}
	for _, limit := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= limit && hi > limit {
			out = utf8Sequences(out, lo, limit)
			return utf8Sequences(out, limit+1, hi)
		}
	}
	if hi <= 0x7F {
		return append(out, []byteRange{{byte(lo), byte(hi)}})
	}
	// Same encoding length n. Split so that every continuation position spans a full
	// range 80-BF below the first differing position: for each suffix length k, a range
	// that does not start at a multiple of 64^k or end just before one is split there.
	n := utf8.RuneLen(lo)
	for k := 1; k < n; k++ {
		m := rune(1)<<(6*k) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				out = utf8Sequences(out, lo, lo|m)
				return utf8Sequences(out, (lo|m)+1, hi)
			}
			if hi&m != m {
				out = utf8Sequences(out, lo, (hi&^m)-1)
				return utf8Sequences(out, hi&^m, hi)
			}
		}
	}
	var a, b [utf8.UTFMax]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([]byteRange, n)
	for i := range n {
		seq[i] = byteRange{a[i], b[i]}
	}
	return append(out, seq)
}
