// Package earley recognises a byte-level CFG (package grammar) incrementally with an Earley
// parser: Advance feeds one byte, IsAccepting tells whether the bytes so far form a sentence,
// and CanAdvance tells which bytes may come next.
//
// The chart (one Earley set per byte consumed) is persistent: sets are never changed once
// built, so Clone shares them and costs O(1), and Rollback to an earlier position just drops
// the sets above it. This is what makes beam forks, per-token snapshots and the depth-first
// walk of a token trie cheap.
//
// Items are (production, dot, origin). The closure follows Aycock and Horspool's treatment of
// nullable nonterminals: predicting a nullable nonterminal also moves the predicting item past
// it. Left recursion is handled natively, and right recursion in constant work per byte by
// Leo's optimisation (leo.go).
package earley

import (
	"fmt"
	"math"
	bits64 "math/bits"
	"slices"
	"sync/atomic"

	"github.com/loomlm/loom/constraint/grammar"
)

// item is an Earley item: production prod with the dot before RHS[dot], started at set origin.
type item struct {
	prod   int32
	dot    int32
	origin int32
	next   grammar.Symbol // RHS[dot], or complete when the dot is at the end
}

// complete marks an item whose dot is at the end of its production.
const complete = grammar.Symbol(math.MaxInt32)

// set is one Earley set. It is immutable once built.
type set struct {
	items []item
	scan  []int32 // indices of items whose next symbol is a terminal
	wait  []int32 // indices of items whose next symbol is a nonterminal (for completions)
	// leo lists, for the nonterminals whose completion here is deterministic, the item
	// that completing them finally yields (Leo's optimisation, see computeLeo).
	leo    []leoItem
	next   grammar.ByteSet
	accept bool
	// id is unique among all sets ever built (a recycled set gets a new one); the memo of
	// Advance is keyed by it.
	id uint64
	// walkOnly sets were built during a token-trie walk and never pushed outside one: no chart
	// holds them, only the memo, so they are recycled when a walk starts from a new root.
	walkOnly bool
	// same caches SameAsPrevious for this set over the set it is always built on: 0 unknown,
	// 1 the same state, 2 not. sameWithin caches SameAsPreviousWithin where same is 2: the
	// horizon + 1 it holds for, its negation where it does not, 0 unknown.
	same       int8
	sameWithin int32
	// ownItems and ownIdx are the set's storage for items and for scan and wait indices,
	// kept when the set is recycled.
	ownItems []item
	ownIdx   []int32
	ownLeo   []leoItem
}

// setIDs numbers sets.
var setIDs atomic.Uint64

// Matcher is the state of a recogniser: the chart of the bytes advanced so far. It is not safe
// for concurrent use; clones are independent of each other.
type Matcher struct {
	g    *grammar.CFG
	sets []*set
	// shared is the number of leading sets that another Matcher (a clone) may also hold: the
	// backing array below it must not be overwritten.
	shared int
	sc     *scratch
	spare  []*set
	memo   memo
	// items, idxs and leos are the matcher's storage for sets' items, scan and wait
	// indices and Leo entries; setArena the unused rest of its chunk of sets.
	items    arena[item]
	idxs     arena[int32]
	leos     arena[leoItem]
	setArena []set
	// runs are the grammar's item automata (loop.go), shared with clones; made on first
	// use (grammarRuns), which clones of one matcher in several goroutines may race to.
	runs atomic.Pointer[grammarRuns]
	// walking is set between BeginWalk and EndWalk, walkBase the lowest chart position the
	// walk has been at; walkSets are the sets built by walks since the last root changed, and
	// walkRoot that root's id.
	walking  bool
	walkBase int
	walkRoot uint64
	walkSets []*set
	// keys are SameAsPreviousWithin's buffers.
	keys [2][]byte
}

// New returns a matcher at the start of g.
func New(g *grammar.CFG) *Matcher {
	m := &Matcher{g: g}
	s := m.newSet()
	sc := m.scratchFor()
	sc.begin(len(g.Names))
	for _, pi := range g.ByLHS[g.Start] {
		sc.add(s, m.mk(pi, 0, 0))
	}
	sc.predicted(g.Start)
	m.closure(s, 0)
	m.sets = append(m.sets, s)
	// Its first set is never overwritten: a clone of the fresh matcher writes nothing to it,
	// so that a processor's template may be cloned by several sessions at once.
	m.shared = 1
	return m
}

// Grammar returns the grammar m recognises.
func (m *Matcher) Grammar() *grammar.CFG { return m.g }

// Len is the number of bytes advanced so far (the position).
func (m *Matcher) Len() int { return len(m.sets) - 1 }

// IsAccepting reports whether the bytes so far are a sentence of the grammar.
func (m *Matcher) IsAccepting() bool { return m.sets[len(m.sets)-1].accept }

// CanAdvance reports whether b may follow the bytes so far. It does not change m.
func (m *Matcher) CanAdvance(b byte) bool { return m.sets[len(m.sets)-1].next.Has(b) }

// NextBytes returns the set of bytes that may follow the bytes so far.
func (m *Matcher) NextBytes() grammar.ByteSet { return m.sets[len(m.sets)-1].next }

// IsDone reports whether no byte may follow (the output is complete, or, for a matcher that
// was fed a rejected byte by mistake, dead; Advance never leaves a matcher dead).
func (m *Matcher) IsDone() bool {
	n := m.sets[len(m.sets)-1].next
	return n.Empty()
}

// Clone returns an independent matcher in the same state. It shares the chart and costs O(1).
// A matcher that is not advanced, rolled back or walked meanwhile may be cloned by several
// goroutines at once (a pipeline's processors are templates that every session clones): once
// it has been cloned at its length, or while it is fresh, Clone only reads it.
func (m *Matcher) Clone() *Matcher {
	if m.walking {
		m.keepWalkChart()
	}
	if m.shared < len(m.sets) {
		m.shared = len(m.sets)
	}
	c := &Matcher{g: m.g, sets: m.sets[:len(m.sets):len(m.sets)], shared: len(m.sets)}
	c.runs.Store(m.grammarRuns())
	return c
}

// Rollback returns m to position pos (0 ≤ pos ≤ Len()), as if only the first pos bytes had
// been advanced.
func (m *Matcher) Rollback(pos int) error {
	if pos < 0 || pos > m.Len() {
		return fmt.Errorf("earley: rollback to position %d: must be in [0, %d]", pos, m.Len())
	}
	for i := len(m.sets) - 1; i > pos; i-- {
		if i >= m.shared {
			m.sets[i] = nil
		}
	}
	m.sets = m.sets[:pos+1]
	m.walkBase = min(m.walkBase, pos)
	return nil
}

// Pop undoes the last n Advances: Rollback(Len()-n). It panics if n > Len(); it is the
// cheap step of a token-trie walk.
func (m *Matcher) Pop(n int) {
	for range n {
		i := len(m.sets) - 1
		if i == 0 {
			panic("earley: Pop past the start")
		}
		if i >= m.shared {
			m.sets[i] = nil
		}
		m.sets = m.sets[:i]
	}
	m.walkBase = min(m.walkBase, len(m.sets)-1)
}

// Advance feeds byte b. It returns false, leaving m unchanged, if b cannot continue the bytes
// so far.
func (m *Matcher) Advance(b byte) bool {
	k := len(m.sets) - 1
	cur := m.sets[k]
	if !cur.next.Has(b) {
		return false
	}
	g := m.g
	// The new set depends only on the chart so far and on which scan items b matches (its
	// signature): bytes with the same signature after the same set give the same set, so
	// it is built once and shared (siblings in a token-trie walk, all the ordinary
	// characters inside a string).
	if s := m.memo.byByte(cur.id, b); s != nil {
		m.pushKept(s)
		return true
	}
	// The signature is a bit per scan item; past 64 items the bits are hashed into sig and
	// kept in wide, which the memo compares in full.
	var sig uint64
	var wide []uint64
	if len(cur.scan) <= 64 {
		for j, ii := range cur.scan {
			if g.Terminals[cur.items[ii].next.Terminal()].Has(b) {
				sig |= 1 << j
			}
		}
	} else {
		sc := m.scratchFor()
		wide = sc.sig[:0]
		for j := 0; j < len(cur.scan); j += 64 {
			var w uint64
			for i, ii := range cur.scan[j:min(j+64, len(cur.scan))] {
				if g.Terminals[cur.items[ii].next.Terminal()].Has(b) {
					w |= 1 << i
				}
			}
			wide = append(wide, w)
			sig = (sig^w)*0x9E3779B97F4A7C15 + uint64(len(wide))
		}
		sc.sig = wide
	}
	if s := m.memo.get(cur.id, sig, wide); s != nil {
		m.memo.putByte(cur.id, b, s)
		m.pushKept(s)
		return true
	}
	s := m.newSet()
	sc := m.scratchFor()
	sc.begin(len(g.Names))
	for _, ii := range cur.scan {
		it := &cur.items[ii]
		if g.Terminals[it.next.Terminal()].Has(b) {
			sc.add(s, m.mk(it.prod, it.dot+1, it.origin))
		}
	}
	m.closure(s, int32(k+1))
	if m.walking {
		s.walkOnly = true
		m.walkSets = append(m.walkSets, s)
	}
	m.memo.put(cur.id, sig, wide, s)
	m.memo.putByte(cur.id, b, s)
	m.push(s)
	return true
}

// AdvanceBytes feeds bs in order. If a byte is rejected it returns the number of bytes
// accepted before it and false, and m is left at its position before the call.
func (m *Matcher) AdvanceBytes(bs []byte) (int, bool) {
	start := m.Len()
	for i, b := range bs {
		if !m.Advance(b) {
			m.Rollback(start)
			return i, false
		}
	}
	return len(bs), true
}

// pushKept pushes a set the memo kept: one pushed outside a walk may be held by a clone's
// chart from now on, and is no longer recycled with its walk's sets.
func (m *Matcher) pushKept(s *set) {
	if !m.walking {
		s.walkOnly = false
	}
	m.push(s)
}

// BeginWalk tells m that a token-trie walk starts from its current state: the bytes advanced
// until EndWalk are popped again, except those a later Advance takes from the memo. When the
// walk starts from another state than the last walk, the sets only the last walks built are
// recycled (and the memo forgets them), so a decode loop does not allocate a new chart's worth
// of sets for every token.
//
// Any order of calls is safe: a set a walk built that is still on the chart when the walk ends
// or when the matcher is cloned, or that an Advance outside a walk takes from the memo, is
// never recycled (a clone may hold it), and BeginWalk during a walk ends that walk first.
func (m *Matcher) BeginWalk() {
	m.EndWalk()
	if root := m.sets[len(m.sets)-1].id; root != m.walkRoot {
		recycled := false
		for _, s := range m.walkSets {
			if s.walkOnly {
				s.walkOnly = false
				m.spare = append(m.spare, s)
				recycled = true
			}
		}
		m.walkSets = m.walkSets[:0]
		if recycled {
			m.memo.forget()
		}
		m.walkRoot = root
	}
	m.walking, m.walkBase = true, len(m.sets)-1
}

// keepWalkChart marks the sets a walk pushed and that are still on the chart as kept: a clone
// or the rest of the decoding may hold them.
func (m *Matcher) keepWalkChart() {
	for _, s := range m.sets[m.walkBase+1:] {
		s.walkOnly = false
	}
}

// StayingBytes returns the bytes that may come next (NextBytes) and, among them, those after
// which the state stays the same within horizon bytes (SameAsPreviousWithin), or ok false if
// that takes more than most Advances: bytes with the same signature (the scan items they
// match) lead to the same state, so it advances once per signature
// (tokentrie.StayingReporter).
func (m *Matcher) StayingBytes(horizon, most int) (next, stays [4]uint64, ok bool) {
	cur := m.sets[len(m.sets)-1]
	ns := cur.next
	if len(cur.scan) > 64 { // signatures past one word: not worth it
		return ns, stays, false
	}
	var sig [256]uint64
	for j, ii := range cur.scan {
		t := &m.g.Terminals[cur.items[ii].next.Terminal()]
		for w, bits := range t {
			for bits != 0 {
				b := w<<6 | bits64.TrailingZeros64(bits)
				bits &= bits - 1
				sig[b] |= 1 << j
			}
		}
	}
	// The bytes by signature, in one pass: a signature's first byte advances for all its bytes
	// (consecutive bytes mostly share one).
	var classSig [256]uint64
	var classStays [256]bool
	n, last := 0, -1
	for b := range 256 {
		if !ns.Has(byte(b)) {
			continue
		}
		k := last
		if k < 0 || classSig[k] != sig[b] {
			k = slices.Index(classSig[:n], sig[b])
		}
		if k < 0 {
			if n >= most {
				return ns, [4]uint64{}, false
			}
			m.Advance(byte(b))
			classStays[n] = m.SameAsPreviousWithin(horizon)
			m.Pop(1)
			classSig[n], k = sig[b], n
			n++
		}
		last = k
		if classStays[k] {
			stays[b>>6] |= 1 << (b & 63)
		}
	}
	return ns, stays, true
}

// SameAsPrevious reports whether the last byte advanced left the parser in a state that
// accepts exactly the continuations the state before it accepted: the last set equals the one
// below it once each set's own position is taken as the same (the state of a loop after one
// more character, such as inside a JSON string). The items of both sets name the same sets
// below, so the two states have equal keys (AppendStateKey). A token-trie walk then goes on
// from the previous state (tokentrie.Aliaser), and a run of such bytes costs no new set.
func (m *Matcher) SameAsPrevious() bool {
	k := int32(len(m.sets) - 1)
	if k < 2 { // the first set's own items are also "started at 0", which accepting checks
		return false
	}
	s, p := m.sets[k], m.sets[k-1]
	if s.same == 0 {
		s.same = 2
		if sameShifted(s, p, k) {
			s.same = 1
		}
	}
	return s.same == 1
}

// SameAsPreviousWithin is SameAsPrevious for the next horizon bytes only: it also holds when
// the two states accept the same continuations of up to horizon bytes, their keys within
// horizon (AppendStateKeyWithin) equal — the states inside a bounded repetition, such as a
// JSON string of at most 200 characters, while more copies may come than horizon bytes can
// take. A token-trie walk, which looks at most one token ahead, asks with the longest token
// (tokentrie.Aliaser), so that a string with a length limit costs no new set per byte either.
// A negative horizon counts as 0.
func (m *Matcher) SameAsPreviousWithin(horizon int) bool {
	horizon = max(horizon, 0) // the cached answer's sign and size encode the horizon
	if m.SameAsPrevious() {
		return true
	}
	k := len(m.sets) - 1
	if k < 2 {
		return false
	}
	s := m.sets[k]
	if s.sameWithin == int32(horizon)+1 {
		return true
	}
	if s.sameWithin == -int32(horizon)-1 {
		return false
	}
	c := m.grammarRuns().canonWithin(horizon)
	if !c.movesAny(s, int32(k)) { // nothing of it is mapped (false is safe: a walk builds the state)
		s.sameWithin = -int32(horizon) - 1
		return false
	}
	m.keys[0] = m.appendKeyAt(m.keys[0][:0], c, int32(k))
	m.keys[1] = m.appendKeyAt(m.keys[1][:0], c, int32(k-1))
	s.sameWithin = -int32(horizon) - 1
	if string(m.keys[0]) == string(m.keys[1]) {
		s.sameWithin = int32(horizon) + 1
	}
	return s.sameWithin > 0
}

// sameShifted reports whether set s at position k equals set p at k-1 when each set's own
// position is taken as the same and every other origin is below k-1.
func sameShifted(s, p *set, k int32) bool {
	if s.accept != p.accept || s.next != p.next || len(s.scan) != len(p.scan) || len(s.wait) != len(p.wait) || len(s.leo) != len(p.leo) {
		return false
	}
	origin := func(a, b int32) bool { return a == k && b == k-1 || a == b && a < k-1 }
	for _, lists := range [2][2][]int32{{s.scan, p.scan}, {s.wait, p.wait}} {
		for j, i := range lists[0] {
			x, y := &s.items[i], &p.items[lists[1][j]]
			if x.prod != y.prod || x.dot != y.dot || !origin(x.origin, y.origin) {
				return false
			}
		}
	}
	for j := range s.leo {
		x, y := &s.leo[j], &p.leo[j]
		if x.nt != y.nt || x.prod != y.prod || !origin(x.origin, y.origin) {
			return false
		}
	}
	return true
}

// EndWalk ends the walk BeginWalk started (if any).
func (m *Matcher) EndWalk() {
	if m.walking {
		m.keepWalkChart()
		m.walking = false
	}
}

// push appends s to the chart, copying the chart first if the slot is shared with a clone.
// The sets themselves stay shared (they are never changed; only sets at or above shared
// are recycled).
func (m *Matcher) push(s *set) {
	if len(m.sets) < m.shared {
		m.sets = append(make([]*set, 0, 2*len(m.sets)+1), m.sets...)
		m.shared = len(m.sets)
	}
	m.sets = append(m.sets, s)
}

// newSet returns an empty set to build. Its items are gathered in the scratch buffer and
// moved to storage of their exact size when the set is closed (see keep).
func (m *Matcher) newSet() *set {
	sc := m.scratchFor()
	if n := len(m.spare); n > 0 {
		s := m.spare[n-1]
		m.spare = m.spare[:n-1]
		s.items = sc.items[:0]
		s.scan, s.wait = nil, nil
		s.leo = s.leo[:0]
		s.next = grammar.ByteSet{}
		s.accept = false
		s.walkOnly = false
		s.same, s.sameWithin = 0, 0
		s.id = setIDs.Add(1)
		return s
	}
	if len(m.setArena) == 0 {
		m.setArena = make([]set, min(max(2*cap(m.setArena), 16), 256))
	}
	s := &m.setArena[0]
	m.setArena = m.setArena[1:]
	s.id, s.items = setIDs.Add(1), sc.items[:0]
	return s
}

// The matcher's storage grows by chunks that double from minArenaChunk up to maxArenaChunk
// items (and indices), so a short-lived clone allocates little.
const (
	minArenaChunk = 128
	maxArenaChunk = 4096
)

// arena is storage carved into exact-size slices, in chunks that double from minArenaChunk
// up to maxArenaChunk elements, so a short-lived clone allocates little.
type arena[T any] struct {
	free  []T
	chunk int
}

// take returns own[:n] when own can hold n elements, else n fresh elements of the arena
// (capacity n, so that appending never reaches a neighbour), which become *own.
func (a *arena[T]) take(own *[]T, n int) []T {
	if cap(*own) < n {
		if len(a.free) < n {
			a.chunk = min(max(2*a.chunk, minArenaChunk), maxArenaChunk)
			a.free = make([]T, max(a.chunk, n))
		}
		*own = a.free[:n:n]
		a.free = a.free[n:]
	}
	return (*own)[:n]
}

// keepLeo moves the Leo entries gathered in the scratch buffer to s's storage.
func (m *Matcher) keepLeo(s *set) {
	s.leo = m.leos.take(&s.ownLeo, len(m.sc.leoBuild))
	copy(s.leo, m.sc.leoBuild)
}

// keep moves a closed set's items out of the scratch buffer into the set's own storage
// (reused from a recycled set when it is large enough, else carved from the matcher's arena:
// a few large allocations instead of one growing slice per set), and lays out its scan and
// wait indices the same way.
func (m *Matcher) keep(s *set, nscan, nwait int) {
	built := s.items
	m.sc.items = built[:0]
	s.items = m.items.take(&s.ownItems, len(built))
	copy(s.items, built)
	ni := nscan + nwait
	idx := m.idxs.take(&s.ownIdx, ni)
	s.scan, s.wait = idx[:0:nscan], idx[nscan:nscan:ni]
}

func (m *Matcher) scratchFor() *scratch {
	if m.sc == nil {
		m.sc = &scratch{}
	}
	return m.sc
}

// mk builds an item, recording the symbol after its dot.
func (m *Matcher) mk(prod, dot, origin int32) item {
	rhs := m.g.Prods[prod].RHS
	next := complete
	if int(dot) < len(rhs) {
		next = rhs[dot]
	}
	return item{prod: prod, dot: dot, origin: origin, next: next}
}

// closure completes set s (at chart index k) with predictions and completions, then records
// its scan items, next bytes and acceptance.
func (m *Matcher) closure(s *set, k int32) {
	g := m.g
	sc := m.sc
	for i := 0; i < len(s.items); i++ {
		it := s.items[i]
		switch {
		case it.next == complete:
			// Complete the production's LHS, started at it.origin. An empty completion
			// (origin k) is covered by the nullable rule below.
			if it.origin == k {
				continue
			}
			lhs := grammar.Symbol(g.Prods[it.prod].LHS)
			origin := m.sets[it.origin]
			if top, ok := origin.leoFor(int32(lhs)); ok {
				sc.add(s, m.mk(top.prod, int32(len(g.Prods[top.prod].RHS)), top.origin))
				continue
			}
			for _, wi := range origin.wait {
				if w := &origin.items[wi]; w.next == lhs {
					sc.add(s, m.mk(w.prod, w.dot+1, w.origin))
				}
			}
		case it.next.IsTerminal():
		default:
			nt := int32(it.next)
			if !sc.isPredicted(nt) {
				sc.predicted(nt)
				for _, pi := range g.ByLHS[nt] {
					sc.add(s, m.mk(pi, 0, k))
				}
			}
			if g.Nullable[nt] {
				sc.add(s, m.mk(it.prod, it.dot+1, it.origin))
			}
		}
	}
	nscan, nwait := 0, 0
	for i := range s.items {
		switch next := s.items[i].next; {
		case next == complete:
		case next.IsTerminal():
			nscan++
		default:
			nwait++
		}
	}
	m.keep(s, nscan, nwait)
	for i := range s.items {
		it := &s.items[i]
		switch {
		case it.next == complete:
			if it.origin == 0 && g.Prods[it.prod].LHS == g.Start {
				s.accept = true
			}
		case it.next.IsTerminal():
			s.scan = append(s.scan, int32(i))
			s.next.Union(&g.Terminals[it.next.Terminal()])
		default:
			s.wait = append(s.wait, int32(i))
		}
	}
	m.computeLeo(s, k)
}
