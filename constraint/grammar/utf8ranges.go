package grammar

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/loomlm/loom/constraint/internal/bounded"
)

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

// utf8Node is a state of a code point class's UTF-8 automaton (utf8Automaton): its edges
// leave it on disjoint sets of bytes, each to the next state, or to the end of the code point
// (next nil).
type utf8Node struct {
	edges []utf8Edge
	id    int // the node's number among the automaton's distinct nodes
}

type utf8Edge struct {
	ranges []byteRange // sorted, disjoint, not adjacent
	next   *utf8Node
}

// utf8Automaton returns the minimal deterministic automaton of the UTF-8 encodings of the
// code points rs (sorted, disjoint ranges), acyclic: the trie of utf8Sequences' byte-range
// sequences in which equal subtrees are one node and the edges of a node that lead to the same
// node are one edge. Where a class's sequences are thousands of positions (\p{Letter} has 896
// sequences of 3 006 byte ranges), the automaton has a few hundred edges, so the rules and
// automata made from it are that much smaller. Automata are cached by their code points
// (immutable, shared): a class that comes back in another rule or grammar costs a lookup.
func utf8Automaton(rs []RuneRange) *utf8Node {
	key := make([]byte, 0, 8*len(rs))
	for _, r := range rs {
		key = binary.LittleEndian.AppendUint32(key, uint32(r.Lo))
		key = binary.LittleEndian.AppendUint32(key, uint32(r.Hi))
	}
	if n, ok := utf8Automata.Load(string(key)); ok {
		return n
	}
	var seqs [][]byteRange
	for _, r := range rs {
		seqs = utf8Sequences(seqs, r.Lo, r.Hi)
	}
	b := utf8Builder{nodes: map[string]*utf8Node{}}
	n := b.node(seqs, 0)
	if n == nil {
		n = &utf8Node{}
	}
	utf8Automata.Store(string(key), n)
	return n
}

// utf8Automata caches utf8Automaton's results by their code points, at most 1 024, then it
// starts over.
var utf8Automata = bounded.New[string, *utf8Node](1024)

// utf8Builder makes utf8Automaton's nodes, one per distinct subtree.
type utf8Builder struct {
	nodes map[string]*utf8Node
	key   []byte
}

// node returns the node below which the sequences seqs (sorted, sharing their first depth
// ranges, all of one length: their first byte sets it) go on from depth, nil where they end.
// Sequences come in code point order, which is their bytes' order, so those that share their
// next range are consecutive.
func (b *utf8Builder) node(seqs [][]byteRange, depth int) *utf8Node {
	if len(seqs) == 0 || len(seqs[0]) == depth {
		return nil
	}
	var edges []utf8Edge
	for i := 0; i < len(seqs); {
		br := seqs[i][depth]
		j := i + 1
		for j < len(seqs) && seqs[j][depth] == br {
			j++
		}
		next := b.node(seqs[i:j], depth+1)
		k := 0
		for k < len(edges) && edges[k].next != next {
			k++
		}
		if k == len(edges) {
			edges = append(edges, utf8Edge{next: next})
		}
		edges[k].ranges = addRange(edges[k].ranges, br)
		i = j
	}
	b.key = b.key[:0]
	for _, e := range edges {
		for _, br := range e.ranges {
			b.key = append(b.key, br.lo, br.hi)
		}
		id := -1
		if e.next != nil {
			id = e.next.id
		}
		// (0xFF, 0x00) is no range: it ends the edge's ranges.
		b.key = append(b.key, 0xFF, 0x00)
		b.key = binary.LittleEndian.AppendUint32(b.key, uint32(id))
	}
	if n, ok := b.nodes[string(b.key)]; ok {
		return n
	}
	n := &utf8Node{edges: edges, id: len(b.nodes)}
	b.nodes[string(b.key)] = n
	return n
}

// addRange adds br to rs (sorted, disjoint, not adjacent), whose ranges all lie below br,
// merging it with the last when they touch.
func addRange(rs []byteRange, br byteRange) []byteRange {
	if k := len(rs); k > 0 && int(rs[k-1].hi)+1 >= int(br.lo) {
		rs[k-1].hi = max(rs[k-1].hi, br.hi)
		return rs
	}
	return append(rs, br)
}

// byteSet returns the bytes of ranges.
func byteSet(ranges []byteRange) ByteSet {
	var s ByteSet
	for _, br := range ranges {
		s.Add(br.lo, br.hi)
	}
	return s
}
