package tokentrie

import (
	"math/bits"

	"github.com/loomlm/loom/core"
)

// Recognizer is an incremental byte recogniser that the walk drives: CanAdvance tells
// whether a byte may come next without changing the state, Advance feeds a byte and reports
// whether it was accepted (a rejected byte leaves the state unchanged), Pop undoes the last n
// accepted bytes.
type Recognizer interface {
	CanAdvance(b byte) bool
	Advance(b byte) bool
	Pop(n int)
}

// Mask is a set of token ids, one bit per token.
type Mask []uint64

// NewMask returns an empty mask over a vocabulary of n tokens.
func NewMask(n int) Mask { return make(Mask, (n+63)/64) }

// Has reports whether id is in the mask.
func (m Mask) Has(id core.TokenID) bool { return m[id>>6]&(1<<(uint(id)&63)) != 0 }

// Set adds id.
func (m Mask) Set(id core.TokenID) { m[id>>6] |= 1 << (uint(id) & 63) }

// Clear empties the mask.
func (m Mask) Clear() { clear(m) }

// Count is the number of tokens in the mask.
func (m Mask) Count() int {
	n := 0
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return n
}

// Fill computes the tokens of the trie whose bytes r accepts in full, from r's current
// state, and adds them to mask (which must cover the vocabulary). r is left in the state it
// had. It returns the number of trie nodes at which r was asked to advance.
//
// slices are vocabulary slices that r is known to accept from its current state in full
// (the loops the parser may repeat from here): their tokens are added at once, and the
// subtrees made only of their tokens are not walked.
func (t *Trie) Fill(r Recognizer, mask Mask, slices ...*Slice) int {
	for _, s := range slices {
		for w, bits := range s.tokens {
			mask[w] |= bits
		}
	}
	depth := 0 // bytes pushed on r
	steps := 0
	nodes := t.nodes
	for i := 1; i < len(nodes); {
		nd := &nodes[i]
		if d := int(nd.depth) - 1; depth > d {
			r.Pop(depth - d)
			depth = d
		}
		if skipped(slices, i) {
			i = int(nd.end)
			continue
		}
		steps++
		if nd.end == int32(i+1) { // a leaf: no need to build the state after its byte
			if r.CanAdvance(nd.b) {
				for _, id := range t.tokens[nd.tokLo:nd.tokHi] {
					mask.Set(id)
				}
			}
			i++
			continue
		}
		if !r.Advance(nd.b) {
			i = int(nd.end)
			continue
		}
		depth++
		for _, id := range t.tokens[nd.tokLo:nd.tokHi] {
			mask.Set(id)
		}
		i++
	}
	if depth > 0 {
		r.Pop(depth)
	}
	return steps
}

// skipped reports whether node i's subtree lies wholly in one of slices.
func skipped(slices []*Slice, i int) bool {
	for _, s := range slices {
		if s.skips(i) {
			return true
		}
	}
	return false
}
