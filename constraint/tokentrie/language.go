package tokentrie

import (
	"github.com/loomlm/loom/constraint/internal/digest"
)

// A slice depends only on the byte strings its automaton keeps alive from its start, not on
// how the automaton is built: a schema's compile meets the same string body as a loop, as the
// lead of a longer repetition and as a rule's prefix automaton, each with its own transitions,
// and the property names of an object that admits others are JSON strings but the names it
// lists, an automaton that behaves as the plain string's once a name's bytes are left behind.
// On Llama 3's vocabulary each slice is a pass of 1.0–1.9 ms over the trie, and a first pass
// over the benchmark corpus made 92 of them, most for these two reasons. So a new automaton
// is first reduced to its minimal automaton (every live state accepting): one whose language
// a built slice has already takes that slice (languageKey), and one that, walking the trie
// beside a built slice's automaton, reaches states accepting what that automaton accepts from
// where it is takes the built slice's nodes and tokens below them instead of stepping there
// (shadow).

// maxLanguageStates bounds the reachable states of an automaton that is reduced; past it,
// its slices are keyed by its transitions alone and passed over the whole trie.
const maxLanguageStates = 256

// minReducedBytes is the fewest bytes an automaton's start must accept for it to be reduced:
// an automaton that rejects most first bytes makes a small slice in a quick pass (50–150 µs
// on Llama 3's trie), where reducing it would cost as much.
const minReducedBytes = 128

// dfa is an automaton's reachable states numbered from 0 (its start): next[q*256+b] is the
// state after byte b from q, or −1 (dead). Every state is accepting.
type dfa struct {
	n    int
	next []int32
}

// reducer keeps the scratch of reductions from one to the next (a trie's slice cache keeps
// one, used under its lock): a reduction reads an automaton's table several times over, and
// buffers of a hundred kilobytes made fresh each time cost more, in clearing and page faults,
// than the reading.
type reducer struct {
	keys   []uint32
	vals   []int32
	states []uint32
	next   []int32
	succ   []int32
	cols   []int32
	slots  []int32
	hashes []uint64
	block  []int32
	refine []int32
	first  []int32
	sig    []int32
}

// resize returns s with length n, reusing its array when it is large enough (contents kept).
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, max(n, 2*cap(s)))
	}
	return s[:n]
}

// acceptsMany reports whether a's start accepts minReducedBytes bytes or more.
func acceptsMany(a Automaton) bool {
	step := newStepper(a)
	n := 0
	if step.trans != nil {
		for _, t := range step.trans[(int(a.Start())-1)*256:][:256] {
			if t != 0 {
				n++
			}
		}
	} else {
		for b := range 256 {
			if t, _ := step.Step(a.Start(), byte(b)); t != 0 {
				n++
			}
		}
	}
	return n >= minReducedBytes
}

// reachable returns a's states reachable from its start (their transitions in r's scratch,
// until its next reachable), or false past most of them. An automaton's states are numbered
// in a small table of open addressing: a table automaton's states may be those of a whole
// grammar's prefix automaton (thousands), of which a rule reaches a few.
func (r *reducer) reachable(a Automaton, most int) (*dfa, bool) {
	step := newStepper(a)
	size := 1
	for size < 2*most {
		size <<= 1
	}
	r.keys, r.vals = resize(r.keys, size), resize(r.vals, size)
	keys, vals := r.keys, r.vals // keys: a state plus one (0: empty)
	clear(keys)
	states := r.states[:0]
	find := func(s uint32) int32 { // s's number, adding it; −1 past most states
		h := (s * 0x9e3779b1) >> 16 & uint32(size-1)
		for keys[h] != 0 {
			if keys[h] == s+1 {
				return vals[h]
			}
			h = (h + 1) & uint32(size-1)
		}
		if len(states) == most {
			return -1
		}
		keys[h], vals[h] = s+1, int32(len(states))
		states = append(states, s)
		return vals[h]
	}
	find(a.Start())
	next := r.next[:0]
	var row [256]uint32
	for q := 0; q < len(states); q++ {
		if step.trans != nil {
			for b, t := range step.trans[(int(states[q])-1)*256:][:256] {
				row[b] = uint32(t)
			}
		} else {
			for b := range row {
				row[b], _ = step.Step(states[q], byte(b))
			}
		}
		last, lastJ := uint32(0), int32(-1) // rows run in long stretches to one state
		for _, s := range row {
			if s != last {
				last, lastJ = s, -1
				if s != 0 {
					if lastJ = find(s); lastJ < 0 {
						r.states, r.next = states, next
						return nil, false
					}
				}
			}
			next = append(next, lastJ)
		}
	}
	r.states, r.next = states, next
	return &dfa{n: len(states), next: next}, true
}

// blocks returns (in r's scratch, until its next blocks) the blocks of equivalent states of
// the automata ds taken together (the states of ds[k] numbered after those of ds[:k]):
// Moore's partition refinement from one block of every state, split by the blocks of their
// successors until no block splits, over one byte of each class of bytes that every state
// maps alike. A state's signature (its block and its successors') is hashed, and compared
// with the first state of its hash's block.
func (r *reducer) blocks(ds ...*dfa) []int32 {
	total := 0
	for _, d := range ds {
		total += d.n
	}
	succ := ds[0].next // the successors in the joint numbering
	if len(ds) > 1 {
		succ = r.succ[:0]
		for _, d := range ds {
			base := int32(len(succ) / 256)
			for _, t := range d.next {
				if t >= 0 {
					t += base
				}
				succ = append(succ, t)
			}
		}
		r.succ = succ
	}
	// Bytes with equal hashes of their columns of successors are taken for one class (rep[b]:
	// the class's first byte), then every row is read to check it; a byte whose column differs
	// from its class's first byte's is a class of its own (classes finer than they could be
	// only cost the refinement time, never its result).
	var hash [256]uint64
	for q := range total {
		for b, t := range succ[q*256 : q*256+256] {
			hash[b] = (hash[b]^uint64(uint32(t)))*0x100000001b3 + 1
		}
	}
	var rep [256]uint8
	firstOf := make(map[uint64]uint8, 32)
	for b := range 256 {
		f, ok := firstOf[hash[b]]
		if !ok {
			f = uint8(b)
			firstOf[hash[b]] = f
		}
		rep[b] = f
	}
	var differs [256]bool
	for q := range total {
		row := succ[q*256 : q*256+256]
		for b, t := range row {
			differs[b] = differs[b] || t != row[rep[b]]
		}
	}
	var reps []int
	for b := range 256 {
		if rep[b] == uint8(b) || differs[b] {
			reps = append(reps, b)
		}
	}
	// cols[q*len(reps)+k]: state q's successor by reps[k].
	k := len(reps)
	r.cols = resize(r.cols, total*k)
	cols := r.cols
	for q := range total {
		for j, b := range reps {
			cols[q*k+j] = succ[q*256+b]
		}
	}
	// The signatures' hashes are numbered in a table of open addressing (slots: a block's
	// number plus one, 0 empty), emptied at each round.
	size := 1
	for size < 2*total {
		size <<= 1
	}
	r.slots, r.hashes = resize(r.slots, size), resize(r.hashes, size)
	r.block, r.refine = resize(r.block, total), resize(r.refine, total)
	r.first, r.sig = resize(r.first, total)[:0], resize(r.sig, k)
	slots, hashes, block, refined, first, sig := r.slots, r.hashes, r.block, r.refine, r.first, r.sig
	clear(block)
	count := 1
	for {
		clear(slots)
		first = first[:0]
		for q := range total {
			h := uint64(block[q])*0x9e3779b97f4a7c15 + 1
			for j, t := range cols[q*k : q*k+k] {
				if t >= 0 {
					t = block[t]
				}
				sig[j] = t
				h = (h ^ uint64(uint32(t))) * 0xbf58476d1ce4e5b9
			}
			i := int(h>>32) & (size - 1)
			for {
				id := slots[i] - 1
				if id < 0 { // a new block
					id = int32(len(first))
					slots[i], hashes[i] = id+1, h
					first = append(first, int32(q))
					refined[q] = id
					break
				}
				if r := int(first[id]); hashes[i] == h && block[r] == block[q] && sameBlocks(block, cols[r*k:r*k+k], sig) {
					refined[q] = id
					break
				}
				i = (i + 1) & (size - 1)
			}
		}
		block, refined = refined, block
		if len(first) == count {
			r.block, r.refine, r.first = block, refined, first
			return block
		}
		count = len(first)
	}
}

// sameBlocks reports whether the successors succ lie in the blocks sig lists.
func sameBlocks(block, succ, sig []int32) bool {
	for i, t := range succ {
		if t >= 0 {
			t = block[t]
		}
		if t != sig[i] {
			return false
		}
	}
	return true
}

// minimal returns d's minimal automaton (in memory of its own), its states numbered breadth
// first from the start's block: automata of one language have equal minimal ones.
func (r *reducer) minimal(d *dfa) *dfa {
	block := r.blocks(d)
	number := make([]int32, d.n) // by block: its number plus one
	member := []int32{0}         // a state of each numbered block
	number[block[0]] = 1
	m := &dfa{next: make([]int32, 0, d.n*256)}
	for k := 0; k < len(member); k++ {
		q := int(member[k])
		for _, t := range d.next[q*256 : q*256+256] {
			if t < 0 {
				m.next = append(m.next, -1)
				continue
			}
			if number[block[t]] == 0 {
				member = append(member, t)
				number[block[t]] = int32(len(member))
			}
			m.next = append(m.next, number[block[t]]-1)
		}
	}
	m.n = len(member)
	return m
}

// languageKey names the byte strings that keep a minimal automaton alive: the digest of its
// transitions. Automata with equal keys give equal unbounded slices and child slices.
func (d *dfa) languageKey() string {
	h := digest.New()
	row := make([]uint16, 256)
	for q := range d.n {
		for b, t := range d.next[q*256 : q*256+256] {
			row[b] = uint16(t + 1)
		}
		h.Uint16s(row)
	}
	return h.Key("language")
}

// maxShadowStates bounds the pairs of states of a shadow.
const maxShadowStates = 1024

// shadow is the product of an automaton with that of a built slice (base), over the pairs of
// states reachable from their starts: a trie node's pair is the two automata's states after
// its bytes. A pair is in step when its first state accepts exactly the byte strings its
// second does: below a node whose pair is in step, the new slice has the base's nodes and
// tokens, and a pass over the trie copies them instead of stepping there.
type shadow struct {
	trans  []uint16 // trans[(p-1)*256+b]: the pair after byte b from pair p (1, 2, …; 0: the automaton dead)
	inStep []bool   // inStep[p-1]
	base   *Slice
}

// newShadow returns the product of d (an automaton's reachable states) with base's automaton
// bd, or false when no reachable pair is in step, when the starts are (the two languages are
// one: the slice is shared, see languageKey) or past maxShadowStates pairs.
func (r *reducer) newShadow(d, bd *dfa, base *Slice) (*shadow, bool) {
	block := r.blocks(d, bd)
	same := func(qa, qb int32) bool { return qb >= 0 && block[qa] == block[int32(d.n)+qb] }
	if same(0, 0) {
		return nil, false
	}
	// ids[a*(bd.n+1)+b+1]: the number of pair (a, b) (b = −1: the base dead), 0 until met.
	ids := make([]uint16, d.n*(bd.n+1))
	type pair struct{ a, b int32 }
	pairs := []pair{{0, 0}}
	ids[1] = 1
	s := &shadow{base: base}
	someInStep := false
	for p := 0; p < len(pairs); p++ {
		cur := pairs[p]
		in := same(cur.a, cur.b)
		s.inStep = append(s.inStep, in)
		someInStep = someInStep || in
		row := len(s.trans)
		s.trans = append(s.trans, make([]uint16, 256)...)
		if in { // the pass never steps from a pair in step
			continue
		}
		for c := range 256 {
			ta := d.next[int(cur.a)*256+c]
			if ta < 0 {
				continue
			}
			tb := int32(-1)
			if cur.b >= 0 {
				tb = bd.next[int(cur.b)*256+c]
			}
			j := int(ta)*(bd.n+1) + int(tb) + 1
			if ids[j] == 0 {
				if len(pairs) == maxShadowStates {
					return nil, false
				}
				pairs = append(pairs, pair{ta, tb})
				ids[j] = uint16(len(pairs))
			}
			s.trans[row+c] = ids[j]
		}
	}
	return s, someInStep
}
