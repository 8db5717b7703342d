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
	return t.FillWith(r, mask, WalkOptions{Slices: slices})
}

// WalkOptions are the vocabulary slices a walk may take instead of walking.
type WalkOptions struct {
	// Slices are accepted by the recogniser in full from its state at the root.
	Slices []*Slice
	// Child, when set, is called with the recogniser in the state after a first byte whose
	// subtree has at least MinChildNodes nodes (and that no Slice skips): the child slices it
	// appends to dst are accepted in full from that state, within that byte's subtree. Child
	// slices of another trie are ignored.
	Child func(dst []*ChildSlice) []*ChildSlice
}

// MinChildNodes is the smallest first-byte subtree for which a walk asks WalkOptions.Child
// for slices: below it, walking costs less than finding them.
const MinChildNodes = 512

// Walker is a Recognizer told when a walk begins and ends (earley.Matcher recycles what its
// earlier walks built).
type Walker interface {
	BeginWalk()
	EndWalk()
}

// An Aliaser is a Recognizer that can tell, just after a successful Advance, that the new
// state accepts the continuations of up to horizon bytes that the state before it accepts
// (the state of a loop after one more byte; of a bounded loop while more copies may come than
// horizon bytes hold). The walk asks with the longest token's length and, where it holds,
// pops the new state and walks the byte's subtree from the previous one: a long run of such
// bytes ("=====" inside a JSON string) costs no new state.
type Aliaser interface {
	SameAsPreviousWithin(horizon int) bool
}

// FillWith is Fill with child slices too.
func (t *Trie) FillWith(r Recognizer, mask Mask, o WalkOptions) int {
	if w, ok := r.(Walker); ok {
		w.BeginWalk()
		defer w.EndWalk()
	}
	slices := o.Slices
	for _, s := range slices {
		for w, bits := range s.tokens {
			mask[w] |= bits
		}
	}
	var child []*ChildSlice // the child slices of the current first byte's subtree
	var parts []*childPart  // their parts below that byte, in force up to childEnd
	childEnd := 0
	alias, _ := r.(Aliaser)
	// depth is the trie depth of the walk's position; pushed[d] tells whether the byte at
	// depth d was pushed on r (not when r said the state after it was the same as before).
	depth := 0
	var onStack [257]bool // most vocabularies' longest token is at most 256 bytes
	pushed := onStack[:]
	if t.maxLen >= len(onStack) {
		pushed = make([]bool, t.maxLen+1)
	}
	// level is the number of states pushed on r; stays[level] holds the bytes after which its
	// state was found to stay the same (Aliaser): such a byte met again from that state needs
	// no Advance (inside a JSON string most bytes of a token leave the parser where it was,
	// and a walk meets the same bytes thousands of times).
	level := 0
	var staysStack [16]staying
	stays := staysStack[:1]
	pop := func(to int) {
		n := 0
		for d := to + 1; d <= depth; d++ {
			if pushed[d] {
				n++
			}
		}
		if n > 0 {
			r.Pop(n)
			level -= n
		}
		depth = to
	}
	steps := 0
	nodes := t.nodes
	for i := 1; i < len(nodes); {
		nd := &nodes[i]
		if d := int(nd.depth) - 1; depth > d {
			pop(d)
		}
		if i >= childEnd {
			parts = parts[:0]
		}
		if skipped(slices, i) || len(parts) > 0 && childSkips(parts, i) {
			i = int(nd.end)
			continue
		}
		steps++
		if nd.end == int32(i+1) { // a leaf: no need to build the state after its byte
			if r.CanAdvance(nd.b) { // a leaf holds tokens
				for _, id := range t.nodeTokens(i) {
					mask.Set(id)
				}
			}
			i++
			continue
		}
		switch {
		case stays[level].has(nd.b):
			depth++ // r stays where it is
			pushed[depth] = false
		case !r.Advance(nd.b):
			i = int(nd.end)
			continue
		default:
			depth++
			pushed[depth] = true
			if alias != nil && alias.SameAsPreviousWithin(t.maxLen) {
				r.Pop(1)
				pushed[depth] = false
				stays[level].add(nd.b)
				break
			}
			level++ // a new state: nothing known of its bytes yet
			if level == len(stays) {
				stays = append(stays, staying{})
			} else {
				stays[level] = staying{}
			}
		}
		if nd.hasTok {
			for _, id := range t.nodeTokens(i) {
				mask.Set(id)
			}
		}
		if depth == 1 && o.Child != nil && int(nd.end)-i >= MinChildNodes {
			child = o.Child(child[:0])
			childEnd = int(nd.end)
			parts = parts[:0]
			for _, cs := range child {
				if cs.t != t { // another vocabulary's: its parts say nothing of this trie
					continue
				}
				p := cs.part(i)
				parts = append(parts, p)
				for _, id := range p.ids {
					mask.Set(id)
				}
			}
		}
		i++
	}
	pop(0)
	return steps
}

// childSkips reports whether node i's subtree lies wholly in one of the child slices' parts.
func childSkips(parts []*childPart, i int) bool {
	for _, p := range parts {
		if p.skips(i) {
			return true
		}
	}
	return false
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

// staying is, for one state of a walk's recogniser, the bytes after which the state was found
// to stay the same (Aliaser).
type staying [4]uint64

func (a *staying) has(b byte) bool { return a[b>>6]&(1<<(b&63)) != 0 }

func (a *staying) add(b byte) { a[b>>6] |= 1 << (b & 63) }
