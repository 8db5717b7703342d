// Package tokentrie holds a vocabulary's token byte strings in a trie, built once per
// tokenizer and shared by every constrained sequence, and computes token masks by walking it
// depth first with an incremental recogniser: a token is allowed when the recogniser accepts
// all its bytes, and a whole subtree is skipped as soon as its prefix is rejected.
//
// The trie is stored as an array of nodes in depth-first preorder; every node records where
// its subtree ends, so skipping a subtree is one index jump and the walk needs no recursion.
package tokentrie

import (
	"sort"
	"sync"

	"github.com/loomlm/loom/core"
)

// node is one trie node: the byte on the edge from its parent, its depth (bytes from the
// root), where its subtree ends in the node array, and the tokens whose bytes end here.
type node struct {
	b     byte
	depth uint16
	end   int32 // index just past the subtree
	tokLo int32 // tokens[tokLo:tokHi] end at this node
	tokHi int32
}

// Trie is the vocabulary's tokens with non-empty bytes, as a trie. It is immutable and safe
// for concurrent use.
type Trie struct {
	nodes  []node // nodes[0] is the root (the empty prefix)
	tokens []core.TokenID
	vocab  int
	empty  []core.TokenID // tokens with no bytes (control tokens)
	maxLen int
	cache  sliceCache
}

// New builds the trie of tok's vocabulary. Tokens with no bytes (control tokens) are not in
// the trie; Empty lists them.
func New(tok core.Tokenizer) *Trie {
	n := tok.VocabSize()
	byts := make([][]byte, n)
	ids := make([]core.TokenID, 0, n)
	t := &Trie{vocab: n}
	for i := range n {
		b := tok.TokenBytes(core.TokenID(i))
		if len(b) == 0 {
			t.empty = append(t.empty, core.TokenID(i))
			continue
		}
		byts[i] = b
		ids = append(ids, core.TokenID(i))
		t.maxLen = max(t.maxLen, len(b))
	}
	sort.SliceStable(ids, func(a, b int) bool { return string(byts[ids[a]]) < string(byts[ids[b]]) })
	// Sorted byte strings visit the trie in preorder: each token's path shares with the
	// previous one exactly their common prefix.
	t.nodes = append(t.nodes, node{})
	stack := []int32{0} // stack[d] is the open node at depth d
	var prev []byte
	for _, id := range ids {
		b := byts[id]
		common := 0
		for common < len(b) && common < len(prev) && b[common] == prev[common] {
			common++
		}
		for len(stack) > common+1 { // close the nodes deeper than the common prefix
			top := stack[len(stack)-1]
			t.nodes[top].end = int32(len(t.nodes))
			stack = stack[:len(stack)-1]
		}
		for d := common; d < len(b); d++ {
			t.nodes = append(t.nodes, node{b: b[d], depth: uint16(d + 1)})
			stack = append(stack, int32(len(t.nodes)-1))
		}
		last := &t.nodes[stack[len(stack)-1]]
		if last.tokHi == 0 {
			last.tokLo = int32(len(t.tokens))
		}
		t.tokens = append(t.tokens, id)
		last.tokHi = int32(len(t.tokens))
		prev = b
	}
	for _, top := range stack {
		t.nodes[top].end = int32(len(t.nodes))
	}
	return t
}

// VocabSize is the size of the vocabulary the trie was built from.
func (t *Trie) VocabSize() int { return t.vocab }

// Nodes is the number of trie nodes, the root included.
func (t *Trie) Nodes() int { return len(t.nodes) }

// Empty lists the tokens with no bytes.
func (t *Trie) Empty() []core.TokenID { return t.empty }

// MaxTokenLen is the length in bytes of the longest token.
func (t *Trie) MaxTokenLen() int { return t.maxLen }

// Automaton is a deterministic byte automaton of a repetition X* (earley.Automaton): Step
// returns the state after a byte (0 when the byte cannot follow; every other state is alive)
// and whether the byte starts a new copy of X; Counted reports whether those counts are
// exact. Automata with equal keys must accept the same byte strings and count alike.
type Automaton interface {
	Key() string
	Start() uint32
	Step(s uint32, b byte) (uint32, bool)
	Counted() bool
}

// Slice is the part of a vocabulary a repetition accepts from its start: the tokens whose
// bytes keep the automaton alive (within a budget of copies, for a bounded one), and the trie
// nodes whose whole subtree is such tokens (a mask walk that has added the tokens skips those
// subtrees).
type Slice struct {
	tokens Mask
	skip   []uint64 // bit i: every token in node i's subtree is alive
	// subMax[i] is the most copies a token below node i starts; a node is skipped when it is
	// in skip and subMax is within budget.
	subMax []uint8
	budget int // unbounded when < 0
	count  int
}

// Tokens is the number of tokens in the slice.
func (s *Slice) Tokens() int { return s.count }

// skips reports whether every token below node i is in the slice.
func (s *Slice) skips(i int) bool {
	return s.skip[i>>6]&(1<<(i&63)) != 0 && (s.budget < 0 || int(s.subMax[i]) <= s.budget)
}

// maxCachedSlices bounds the automata whose slices a trie keeps; past it the cache starts
// over.
const maxCachedSlices = 256

type sliceCache struct {
	mu       sync.Mutex
	entries  map[string]*sliceEntry
	children map[string]*ChildSlice
}

// sliceEntry is one automaton's slices: unbounded, and per budget below the most copies any
// token starts (only for a counted automaton), each made when first asked for.
type sliceEntry struct {
	all     *Slice
	budgets []*Slice  // budgets[r]: at most r copies (nil until asked for)
	byUnits [][]int32 // byUnits[r]: the live nodes holding tokens whose path starts r copies
}

// budget returns the slice of budget r < len(e.budgets), making it (and the smaller ones it
// is made from) on first use: budget r's tokens are budget r-1's and those whose path starts
// exactly r copies.
func (t *Trie) budget(e *sliceEntry, r int) *Slice {
	if e.budgets[r] != nil {
		return e.budgets[r]
	}
	tokens, count := NewMask(t.vocab), 0
	if r > 0 {
		prev := t.budget(e, r-1)
		tokens, count = append(Mask(nil), prev.tokens...), prev.count
	}
	for _, i := range e.byUnits[r] {
		for _, id := range t.tokens[t.nodes[i].tokLo:t.nodes[i].tokHi] {
			tokens.Set(id)
			count++
		}
	}
	e.budgets[r] = &Slice{tokens: tokens, skip: e.all.skip, subMax: e.all.subMax, budget: r, count: count}
	return e.budgets[r]
}

// Slice returns the slice of a within budget copies (budget < 0: any number). The first call
// for an automaton key makes one pass over the trie, and the first call for a budget makes its
// token set; they are cached by the key. A bounded slice needs a counted automaton; for another, Slice
// returns nil.
func (t *Trie) Slice(a Automaton, budget int) *Slice {
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	e, ok := t.cache.entries[a.Key()]
	if !ok {
		e = t.newSliceEntry(a)
		if t.cache.entries == nil || len(t.cache.entries) >= maxCachedSlices {
			t.cache.entries = map[string]*sliceEntry{}
		}
		t.cache.entries[a.Key()] = e
	}
	switch {
	case budget < 0:
		return e.all
	case !a.Counted():
		return nil
	case budget >= len(e.budgets): // more copies than any token starts
		return e.all
	}
	return t.budget(e, budget)
}

func (t *Trie) newSliceEntry(a Automaton) *sliceEntry {
	counted := a.Counted()
	all := &Slice{tokens: NewMask(t.vocab), skip: make([]uint64, (len(t.nodes)+63)/64), budget: -1}
	if counted { // only budgets read the copies below a node: one byte per node otherwise unused
		all.subMax = make([]uint8, len(t.nodes))
	}
	// One pass in preorder. open[k] is the live node of depth k+1 on the current path, with
	// the most copies a token below it starts so far and whether a rejected node lies below
	// it; a node's subMax and skip bit are known when the pass leaves its subtree.
	type openNode struct {
		node    int32
		subMax  uint8
		hasDead bool
	}
	open := make([]openNode, 0, t.maxLen)
	closeTo := func(depth int) { // leave the subtrees of the open nodes deeper than depth
		for len(open) > depth {
			o := open[len(open)-1]
			open = open[:len(open)-1]
			if counted {
				all.subMax[o.node] = o.subMax
			}
			if !o.hasDead {
				all.skip[o.node>>6] |= 1 << (o.node & 63)
			}
			if n := len(open); n > 0 {
				open[n-1].subMax = max(open[n-1].subMax, o.subMax)
				open[n-1].hasDead = open[n-1].hasDead || o.hasDead
			}
		}
	}
	states := make([]uint32, t.maxLen+1) // states[d]: the automaton after the path's d bytes
	units := make([]uint8, t.maxLen+1)   // units[d]: copies the path's d bytes start (≤ 255)
	states[0] = a.Start()
	var byUnits [256][]int32 // live nodes holding tokens, by the copies their path starts
	maxUnits := 0
	for i := 1; i < len(t.nodes); i++ {
		nd := &t.nodes[i]
		d := int(nd.depth)
		closeTo(d - 1)
		st, started := a.Step(states[d-1], nd.b) // the parent is live: dead subtrees are skipped
		if st == 0 {
			if n := len(open); n > 0 {
				open[n-1].hasDead = true
			}
			i = int(nd.end) - 1 // the whole subtree is rejected
			continue
		}
		states[d] = st
		u := units[d-1]
		if started && u < 255 {
			u++
		}
		units[d] = u
		open = append(open, openNode{node: int32(i), subMax: u})
		maxUnits = max(maxUnits, int(u))
		if counted && nd.tokHi > nd.tokLo {
			byUnits[u] = append(byUnits[u], int32(i))
		}
		for _, id := range t.tokens[nd.tokLo:nd.tokHi] {
			all.tokens.Set(id)
			all.count++
		}
	}
	closeTo(0)
	e := &sliceEntry{all: all}
	if !counted || maxUnits == 0 {
		all.subMax = nil // no budgets will read it (a lead automaton starts no copies)
		return e
	}
	e.budgets = make([]*Slice, maxUnits)
	e.byUnits = byUnits[:maxUnits:maxUnits]
	return e
}
