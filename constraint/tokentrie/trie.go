// Package tokentrie holds a vocabulary's token byte strings in a trie, built once per
// tokenizer and shared by every constrained sequence, and computes token masks by walking it
// depth first with an incremental recogniser: a token is allowed when the recogniser accepts
// all its bytes, and a whole subtree is skipped as soon as its prefix is rejected.
//
// The trie is stored as an array of nodes in depth-first preorder; every node records where
// its subtree ends, so skipping a subtree is one index jump and the walk needs no recursion.
package tokentrie

import (
	"encoding/binary"
	"iter"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/loomlm/loom/core"
)

// node is one trie node: the byte on the edge from its parent, whether tokens end here (they
// are Trie.nodeTokens), its depth (bytes from the root) and where its subtree ends in the node
// array. Eight bytes: the walks and slice passes read every node they reach, and the
// tokens' range (Trie.tokStart) only where there are some — with the range in the node (16
// bytes), Llama 3's 274 521-node trie was 4.4 MB of nodes instead of 2.2.
type node struct {
	b      byte
	hasTok bool
	depth  uint16
	end    int32 // index just past the subtree
}

// Trie is the vocabulary's tokens with non-empty bytes, as a trie. It is immutable and safe
// for concurrent use.
type Trie struct {
	nodes  []node // nodes[0] is the root (the empty prefix)
	tokens []core.TokenID
	// tokStart[i] is where node i's tokens start in tokens, tokStart[i+1] where they end.
	tokStart []int32
	// tokenNode[k] is the node where tokens[k] ends: a slice pass sets the tokens of its live
	// nodes in one sequential pass over the tokens, without a branch per node.
	tokenNode []int32
	vocab     int
	empty     []core.TokenID // tokens with no bytes (control tokens)
	maxLen    int
	cache     sliceCache
	traces    traceCache
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
	t.tokStart = append(t.tokStart, 0)
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
			t.tokStart = append(t.tokStart, int32(len(t.tokens))) // its tokens come next
			stack = append(stack, int32(len(t.nodes)-1))
		}
		t.nodes[stack[len(stack)-1]].hasTok = true
		t.tokens = append(t.tokens, id)
		t.tokenNode = append(t.tokenNode, stack[len(stack)-1])
		prev = b
	}
	for _, top := range stack {
		t.nodes[top].end = int32(len(t.nodes))
	}
	t.tokStart = append(t.tokStart, int32(len(t.tokens)))
	return t
}

// nodeTokens returns the tokens whose bytes end at node i.
func (t *Trie) nodeTokens(i int) []core.TokenID {
	return t.tokens[t.tokStart[i]:t.tokStart[i+1]]
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
	id     uint64 // unique among slices: names it in a walk's trace key
}

// sliceIDs numbers slices.
var sliceIDs atomic.Uint64

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
	status   []uint8 // the slice passes' scratch (statusScratch), kept for the next
	entries  map[string]*sliceEntry
	children map[string]*ChildSlice
	partMask Mask // a child part's tokens while it is built (newChildPart), left empty
	// languages holds the unbounded slices by their automata's languageKey; bases, the last
	// maxShadowBases of them holding half the vocabulary or more, with their automata's
	// minimal automata, for a new automaton's shadow (see language.go).
	languages map[string]*Slice
	bases     []shadowBase
	reducer   reducer
	stats     SliceStats
	// below and rejects are newFlatSliceEntry's scratch; full, the slice that takes every
	// token and skips every node (densePass starts from it), made on first use (fullSlice).
	below   []uint64
	rejects []int32
	full    *Slice
}

// belowScratch returns a bit per node, all clear (newFlatSliceEntry clears what it set).
func (c *sliceCache) belowScratch(n int) []uint64 {
	if w := (n + 63) / 64; len(c.below) != w {
		c.below = make([]uint64, w)
	}
	return c.below
}

// fullSlice returns the slice of every token of the trie, which skips every node but the root.
func (c *sliceCache) fullSlice(t *Trie) *Slice {
	if c.full == nil {
		s := &Slice{tokens: NewMask(t.vocab), skip: make([]uint64, (len(t.nodes)+63)/64), budget: -1}
		for _, id := range t.tokens {
			s.tokens.Set(id)
		}
		for i := 1; i < len(t.nodes); i++ {
			s.skip[i>>6] |= 1 << (i & 63)
		}
		s.count = len(t.tokens)
		c.full = s
	}
	return c.full
}

// SliceStats counts how a trie's unbounded slices were made.
type SliceStats struct {
	Passes   int // by a pass over the whole trie
	Shared   int // taken from a slice of the same language
	Shadowed int // by a pass in the shadow of a built slice
}

// SliceStats returns the counts of the trie's slices so far.
func (t *Trie) SliceStats() SliceStats {
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	return t.cache.stats
}

// shadowBase is a built unbounded slice and its automaton's states.
type shadowBase struct {
	d     *dfa
	slice *Slice
}

// maxShadowBases is the most slices a new automaton's shadow is tried against.
const maxShadowBases = 4

// sliceEntry is one automaton's slices: unbounded, and per budget below the most copies any
// token starts (only for a counted automaton), each made when first asked for.
type sliceEntry struct {
	all *Slice
	// counted: subMax, units and budgets are known. The first pass leaves them out unless a
	// budget is asked for (most slices are only ever taken unbounded); the first budget makes
	// a second pass that counts.
	counted bool
	subMax  []uint8  // subMax[i]: the most copies a token below node i starts
	units   []uint8  // units[i]: the copies the path to live node i starts (manyUnits: not live)
	budgets []*Slice // budgets[r]: at most r copies (nil until asked for)
	// fewLive: the live nodes are few, and tokenNodes are those holding tokens, so that a
	// budget's token set visits them rather than every token.
	fewLive    bool
	tokenNodes []int32
}

// manyUnits is units' value for a node that is not live, and for one whose path starts
// manyUnits copies or more: no budget below it takes such a node's tokens (a walk checks them
// with the recogniser), and a bounded slice's budget is at most manyUnits − 1.
const manyUnits = 255

// budget returns the slice of budget r < len(e.budgets), making it on first use: the live
// tokens whose path starts at most r copies.
func (t *Trie) budget(e *sliceEntry, r int) *Slice {
	if e.budgets[r] != nil {
		return e.budgets[r]
	}
	tokens, count := NewMask(t.vocab), 0
	if e.fewLive {
		for _, i := range e.tokenNodes {
			if int(e.units[i]) <= r {
				ids := t.nodeTokens(int(i))
				for _, id := range ids {
					tokens.Set(id)
				}
				count += len(ids)
			}
		}
	} else {
		for k, id := range t.tokens {
			in := uint64(^(r - int(e.units[t.tokenNode[k]]))) >> 63 // units ≤ r
			tokens[id>>6] |= in << (id & 63)
			count += int(in)
		}
	}
	e.budgets[r] = &Slice{tokens: tokens, skip: e.all.skip, subMax: e.subMax, budget: r, count: count, id: sliceIDs.Add(1)}
	return e.budgets[r]
}

// Slice returns the slice of a within budget copies (budget < 0: any number). The first call
// for an automaton key makes its passes over the trie (again, counting copies, for the first
// budget), and the first call for a budget makes its token set; they are cached by the
// key. A bounded slice needs a counted automaton; for another, Slice returns nil.
func (t *Trie) Slice(a Automaton, budget int) *Slice {
	t.cache.mu.Lock()
	defer t.cache.mu.Unlock()
	// A budget of the longest token's bytes or more takes the unbounded slice (a byte starts at
	// most one copy, so no token starts more): only a smaller one needs the counting pass.
	bounded := budget >= 0 && budget < t.maxLen && a.Counted()
	e, ok := t.cache.entries[a.Key()]
	if !ok {
		if bounded {
			e = t.newSliceEntry(a)
		} else {
			e = t.newUnboundedEntry(a)
		}
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
	case budget >= t.maxLen:
		return e.all
	}
	if !e.counted { // a budget after the unbounded slice alone: count into the entry
		t.countCopies(e, a)
	}
	if budget >= len(e.budgets) && len(e.budgets) < manyUnits { // more copies than any token starts
		return e.all
	}
	return t.budget(e, min(budget, manyUnits-1))
}

// newSliceEntry makes a's unbounded slice and what its budgets need (a counts copies), in
// countCopies' passes.
func (t *Trie) newSliceEntry(a Automaton) *sliceEntry {
	t.cache.stats.Passes++
	e := &sliceEntry{}
	t.countCopies(e, a)
	return e
}

// newUnboundedEntry makes a's unbounded slice: the slice of a built one of the same language,
// or newFlatSliceEntry's passes, in the shadow of a large built slice where a reaches states
// that accept as its automaton's do (language.go).
func (t *Trie) newUnboundedEntry(a Automaton) *sliceEntry {
	if !acceptsMany(a) {
		t.cache.stats.Passes++
		return t.newFlatSliceEntry(a, nil)
	}
	red := &t.cache.reducer
	r, ok := red.reachable(a, maxLanguageStates)
	if !ok {
		t.cache.stats.Passes++
		return t.newFlatSliceEntry(a, nil)
	}
	d := red.minimal(r)
	lang := d.languageKey()
	if s := t.cache.languages[lang]; s != nil {
		t.cache.stats.Shared++
		return &sliceEntry{all: s}
	}
	var sh *shadow
	for i := len(t.cache.bases) - 1; i >= 0 && sh == nil; i-- {
		b := t.cache.bases[i]
		if s, ok := red.newShadow(d, b.d, b.slice); ok {
			sh = s
		}
	}
	if sh != nil {
		t.cache.stats.Shadowed++
	} else {
		t.cache.stats.Passes++
	}
	e := t.newFlatSliceEntry(a, sh)
	if t.cache.languages == nil || len(t.cache.languages) >= maxCachedSlices {
		t.cache.languages = map[string]*Slice{}
	}
	t.cache.languages[lang] = e.all
	if 2*e.all.count >= len(t.tokens) {
		if len(t.cache.bases) == maxShadowBases {
			t.cache.bases = append(t.cache.bases[:0], t.cache.bases[1:]...)
		}
		t.cache.bases = append(t.cache.bases, shadowBase{d, e.all})
	}
	return e
}

// countCopies makes what e's budgets need (and e's unbounded slice when the entry has none
// yet: one it has may be shared, and is left as it is), in two passes
// over the trie as newFlatSliceEntry's, the first also counting the copies the path to each
// live node starts, the second also the most copies below each node, from its children's
// (passed just before it in reverse preorder, their maximum kept by depth). A stack of the
// subtrees passed, popped at each node, had a third of the pass's samples in a profile; this
// way the pass of a string loop with a budget took 5.0–6.4 ms against 5.5–6.9 (`-bench
// SliceBuild/string/table/budget`, five rounds). The two first passes stay apart (one loop
// for both, the counts switched off, slowed the uncounted one by a fifth to a half); the
// second pass is shared (secondPass).
func (t *Trie) countCopies(e *sliceEntry, a Automaton) {
	nodes := t.nodes
	e.counted = true
	status := t.statusScratch()
	states := make([]uint32, t.maxLen+1)
	states[0] = a.Start()
	step := newStepper(a)
	lives, maxUnits := 0, 0
	units := make([]uint8, len(nodes))
	for i := range units {
		units[i] = manyUnits
	}
	path := make([]uint8, t.maxLen+1) // path[d]: the copies the current path's d bytes start
	for i := 1; i < len(nodes); i++ {
		nd := &nodes[i]
		d := int(nd.depth)
		var st uint32
		var started bool
		if step.trans != nil {
			st, started = step.table(states[d-1], nd.b)
		} else {
			st, started = step.Step(states[d-1], nd.b)
		}
		if st == 0 {
			status[i] = rejected
			i = int(nd.end) - 1
			continue
		}
		u := path[d-1]
		if started && u < manyUnits {
			u++
		}
		status[i], states[d], path[d], units[i] = live, st, u, u
		maxUnits = max(maxUnits, int(u))
		lives++
	}
	if maxUnits > 0 { // no budgets otherwise (a lead automaton starts no copies)
		e.units, e.subMax = units, make([]uint8, len(nodes))
		e.budgets = make([]*Slice, maxUnits)
	}
	all := t.newPassSlice()
	t.secondPass(e, all, status, lives, nil)
	if e.all == nil {
		e.all = all
	}
}

// newFlatSliceEntry makes a's unbounded slice without copy counts, in two passes without a
// path of open nodes: the first, in preorder, steps the automaton from the state of each node's
// parent (kept by depth) and notes each live node and each rejected one (whose subtree it jumps
// over); the second, in reverse preorder, knows the first rejected node after each live node,
// so that a live node is skipped when none lies inside its subtree. The path's bookkeeping at
// every node (leaving the subtrees deeper than the next node, a loop whose length changes from
// node to node) cost more than the stepping: `go test ./constraint/tokentrie -run '^$' -bench
// SliceBuild`, a string's loop on Llama 3's trie 3.7–5.1 → 2.5–3.8 ms. Setting the tokens of
// each live node as the pass met it cost as much again (a loop of zero or one token, its branch
// mispredicted): where most nodes are live, one pass over the tokens in the trie's order sets
// them from their nodes' status instead, 3.3–3.6 → 1.4–2.1 ms (table: 2.4–3.6 → 1.2–1.8 ms).
//
// Where the rejected nodes' subtrees hold fewer than half the tokens (the strings' slices,
// which take nearly every token), the first pass also lists the rejected nodes and marks
// their ancestors, and the second (densePass) starts from every token and skip and takes
// back theirs, without passing the trie again: `go test ./constraint/tokentrie -run '^$'
// -bench SliceBuild`, a string's loop 1.61–1.63 → 0.89–1.01 ms through Step, 1.40–1.42 →
// 0.68–0.77 ms through its table, digits (the other way) 53–64 → 71–87 µs.
//
// In a shadow (sh not nil) the first pass steps the shadow's pairs instead, and leaves below
// a node whose pair is in step, which the second pass fills from the shadow's base.
func (t *Trie) newFlatSliceEntry(a Automaton, sh *shadow) *sliceEntry {
	e := &sliceEntry{all: t.newPassSlice()}
	if sh != nil {
		status := t.statusScratch()
		t.secondPass(e, e.all, status, t.shadowPass(sh, status), sh.base)
		return e
	}
	nodes := t.nodes
	status := t.statusScratch()
	states := make([]uint32, t.maxLen+1)
	states[0] = a.Start()
	// path[d] is the live node at depth d on the way to the current one; below marks the
	// nodes with a rejected node in their subtree (each rejected node marks its ancestors up
	// to one marked before), and rejects lists the rejected nodes, for the dense second pass.
	path := make([]int32, t.maxLen+1)
	below := t.cache.belowScratch(len(nodes))
	rejects := t.cache.rejects[:0]
	removed := 0 // tokens in rejected subtrees
	lives := 0
	trans := newStepper(a).trans
	for i := 1; i < len(nodes); i++ {
		nd := &nodes[i]
		d := int(nd.depth)
		var st uint32
		if trans != nil {
			st = uint32(trans[int(states[d-1]-1)<<8|int(nd.b)])
		} else {
			st, _ = a.Step(states[d-1], nd.b)
		}
		if st == 0 {
			status[i] = rejected
			rejects = append(rejects, int32(i))
			removed += int(t.tokStart[nd.end] - t.tokStart[i])
			for up := d - 1; up >= 1; up-- {
				p := path[up]
				if below[p>>6]&(1<<(p&63)) != 0 {
					break
				}
				below[p>>6] |= 1 << (p & 63)
			}
			i = int(nd.end) - 1
			continue
		}
		status[i] = live
		states[d] = st
		path[d] = int32(i)
		lives++
	}
	t.cache.rejects = rejects
	if total := len(t.tokens); removed*2 < total {
		t.densePass(e, status, below, rejects, lives, total-removed)
	} else {
		t.secondPass(e, e.all, status, lives, nil)
	}
	clear(below)
	return e
}

// densePass is secondPass for an unbounded slice without copy counts that rejects fewer
// tokens than it takes: it starts from every node skipped and every token taken and takes
// back what the rejected nodes (rejects, in preorder) rule out, their subtrees' nodes and
// tokens and, for the nodes above them (below), the skip, in time of the order of what is
// rejected rather than of the whole trie (a string's loop on Llama 3's trie passes 268 000
// nodes and 128 000 tokens for a few thousand rejected ones). The first pass met lives live
// nodes, and count tokens are left. It leaves status all unseen.
func (t *Trie) densePass(e *sliceEntry, status []uint8, below []uint64, rejects []int32, lives, count int) {
	all := e.all
	e.fewLive = lives*4 <= len(t.tokens)
	full := t.cache.fullSlice(t)
	copy(all.tokens, full.tokens)
	for w := range all.skip {
		all.skip[w] = full.skip[w] &^ below[w]
	}
	for _, r := range rejects {
		end := t.nodes[r].end
		clearBits(all.skip, int(r), int(end))
		for _, id := range t.tokens[t.tokStart[r]:t.tokStart[end]] {
			all.tokens[id>>6] &^= 1 << (id & 63)
		}
	}
	all.count = count
	clear(status)
}

// clearBits clears bits [from, to) of dst.
func clearBits(dst []uint64, from, to int) {
	for w, m := range bitRange(from, to) {
		dst[w] &^= m
	}
}

// shadowPass is newFlatSliceEntry's first pass in a shadow: a node whose pair is in step is
// inStep, and the pass leaves its subtree unseen. It returns the live nodes it met.
func (t *Trie) shadowPass(sh *shadow, status []uint8) int {
	nodes := t.nodes
	states := make([]uint16, t.maxLen+1)
	states[0] = 1
	trans, in := sh.trans, sh.inStep
	lives := 0
	for i := 1; i < len(nodes); i++ {
		nd := &nodes[i]
		d := int(nd.depth)
		st := trans[int(states[d-1]-1)<<8|int(nd.b)]
		switch {
		case st == 0:
			status[i] = rejected
			i = int(nd.end) - 1
		case in[st-1]:
			status[i] = inStep
			i = int(nd.end) - 1
		default:
			status[i] = live
			states[d] = st
			lives++
		}
	}
	return lives
}

// secondPass fills all, the unbounded slice of entry e, whose first pass left each node's
// status and counted lives live nodes: the live nodes' tokens (with many, in one pass over
// the tokens (setLiveTokens); with few, node by node here, which visits only them), the
// skipped subtrees (in reverse preorder, knowing the first rejected node after each live
// node), and with the copies of a counting pass (e.units, nil for none) the most copies below
// each node, from its children's (passed just before it, their maximum kept by depth). Below
// a node in step with a shadow's base (inStep, base not nil) it copies the base's skipped
// nodes and tokens. It leaves the status scratch all unseen.
func (t *Trie) secondPass(e *sliceEntry, all *Slice, status []uint8, lives int, base *Slice) {
	nodes := t.nodes
	mask, skip, units, subMax := all.tokens, all.skip, e.units, e.subMax
	e.fewLive = lives*4 <= len(t.tokens)
	count := 0
	if !e.fewLive {
		count = t.setLiveTokens(mask, status)
	}
	var below []uint8 // below[d]: the most copies below the live nodes of depth d passed since the last node of depth d−1
	if units != nil {
		below = make([]uint8, t.maxLen+2)
	}
	next := int32(len(nodes)) // the first rejected node after i
	for i := len(status) - 1; i >= 1; {
		if i&7 == 7 && binary.LittleEndian.Uint64(status[i-7:i+1]) == 0 {
			i -= 8 // eight nodes the first pass did not reach (a narrow slice leaves most so)
			continue
		}
		switch status[i] {
		case rejected:
			next = int32(i)
			status[i] = unseen
		case live, inStep:
			nd := &nodes[i]
			switch {
			case status[i] == inStep:
				// Below node i the base's automaton accepts as this one: its skipped nodes
				// (node i's own bit included) and its tokens are this slice's.
				copyBits(skip, base.skip, i, int(nd.end))
				if !base.skips(i) {
					next = int32(i) // a rejected node lies below i, inside every ancestor's subtree
				}
				for _, id := range t.tokens[t.tokStart[i+1]:t.tokStart[nd.end]] {
					in := base.tokens[id>>6] >> (id & 63) & 1
					mask[id>>6] |= in << (id & 63)
					count += int(in)
				}
			case next >= nd.end:
				skip[i>>6] |= 1 << (i & 63)
			}
			if e.fewLive && nd.hasTok { // node i's own tokens (setLiveTokens sets them otherwise)
				ids := t.nodeTokens(i)
				for _, id := range ids {
					mask.Set(id)
				}
				count += len(ids)
				if units != nil {
					e.tokenNodes = append(e.tokenNodes, int32(i))
				}
			}
			if units != nil {
				d := nd.depth
				m := max(units[i], below[d+1])
				subMax[i], below[d+1] = m, 0
				below[d] = max(below[d], m)
			}
			status[i] = unseen
		}
		i--
	}
	all.count = count
}

// Node status in a slice's passes: nothing (not reached), live, rejected, or live and in step
// with a shadow's base (its subtree not reached); live and inStep are the odd ones
// (setLiveTokens).
const (
	unseen   = 0
	live     = 1
	rejected = 2
	inStep   = 3
)

// copyBits copies bits [from, to) of src into dst.
func copyBits(dst, src []uint64, from, to int) {
	for w, m := range bitRange(from, to) {
		dst[w] = dst[w]&^m | src[w]&m
	}
}

// bitRange yields, for each 64-bit word that bits [from, to) touch, its index and the mask of
// those bits in it.
func bitRange(from, to int) iter.Seq2[int, uint64] {
	return func(yield func(int, uint64) bool) {
		for from < to {
			lo := from & 63
			hi := min(64, lo+(to-from))
			m := ^uint64(0) << lo
			if hi < 64 {
				m &= 1<<hi - 1
			}
			if !yield(from>>6, m) {
				return
			}
			from += hi - lo
		}
	}
}

// newPassSlice returns an empty unbounded slice of the trie, for a pass to fill.
func (t *Trie) newPassSlice() *Slice {
	return &Slice{tokens: NewMask(t.vocab), skip: make([]uint64, (len(t.nodes)+63)/64), budget: -1, id: sliceIDs.Add(1)}
}

// statusScratch returns the cache's node status scratch (its lock is held), padded to whole
// words and all unseen: a pass's second half clears what its first set.
func (t *Trie) statusScratch() []uint8 {
	n := (len(t.nodes) + 7) &^ 7
	if len(t.cache.status) != n {
		t.cache.status = make([]uint8, n)
	}
	return t.cache.status
}

// setLiveTokens sets in mask the tokens of the nodes whose status is live, in one pass over
// the tokens in the trie's order without a branch per node, and returns how many.
func (t *Trie) setLiveTokens(mask Mask, status []uint8) int {
	count := 0
	for k, id := range t.tokens {
		in := uint64(status[t.tokenNode[k]] & live)
		mask[id>>6] |= in << (id & 63)
		count += int(in)
	}
	return count
}

// A Table is an automaton whose transitions are a dense table, read directly by the passes
// over the trie (one indirect call per trie node otherwise). Table returns trans, where
// trans[(s-1)*256+b] is the state after byte b from state s, in the numbering Start and Step
// use (states 1, 2, …; 0 dead), and start, whose bit (s-1)*256+b says that the transition
// starts a copy (nil: none does). The table must say what Step says for every state reachable
// from Start. A nil trans means the automaton has no table: the passes call Step.
type Table interface {
	Table() (trans []uint16, start []uint64)
}

// stepper steps an automaton for a pass over the trie: through its table when it has one
// (table, inlined in the passes' loops), through the automaton's Step otherwise.
type stepper struct {
	Automaton
	trans []uint16
	start []uint64
}

func newStepper(a Automaton) stepper {
	s := stepper{Automaton: a}
	if t, ok := a.(Table); ok {
		s.trans, s.start = t.Table()
	}
	return s
}

// table is Step read from the table (trans not nil). Callers choose between table and Step
// themselves: a method doing both, with its interface call, is past Go's inlining budget,
// and the walks step once per trie node.
func (s *stepper) table(st uint32, b byte) (uint32, bool) {
	j := (int(st)-1)<<8 | int(b)
	return uint32(s.trans[j]), s.start != nil && s.start[j>>6]&(1<<(j&63)) != 0
}
