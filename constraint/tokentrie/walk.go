package tokentrie

import (
	"math/bits"
	"sync"

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
//
// A walk from a state that keeps slices meets most of the trie's nodes it visits without
// pushing a state on r (inside a JSON string, the bytes before a token's closing quote leave
// the parser where it was): which nodes it visits there, the tokens it takes and the nodes
// where r must really advance depend only on the slices, on the bytes r accepts and on those
// after which its state stays the same. When r tells those at once (StayingReporter), the
// walk records them in a trace the trie keeps under those three; a later walk with the same
// three replays the trace and walks only below the nodes where r advances, whatever grammar r
// comes from.
func (t *Trie) FillWith(r Recognizer, mask Mask, o WalkOptions) int {
	if w, ok := r.(Walker); ok {
		w.BeginWalk()
		defer w.EndWalk()
	}
	for _, s := range o.Slices {
		for w, bits := range s.tokens {
			mask[w] |= bits
		}
	}
	w := &walk{t: t, r: r, mask: mask, o: o}
	w.alias, _ = r.(Aliaser)
	if t.maxLen < len(w.onStack) {
		w.pushed = w.onStack[:]
	} else {
		w.pushed = make([]bool, t.maxLen+1)
	}
	w.stays = w.staysStack[:1]
	key, traced := w.traceKey()
	if !traced {
		w.run(1, len(t.nodes))
		w.pop(0)
		return w.steps
	}
	if tr := t.traces.get(key); tr != nil {
		for _, id := range tr.tokens {
			mask.Set(id)
		}
		for _, i := range tr.advances {
			d := int(t.nodes[i].depth) - 1 // every byte above i left r where it was
			w.depth = d
			w.run(int(i), int(t.nodes[i].end))
			w.pop(d)
		}
		return w.steps + tr.steps
	}
	w.rec = &trace{}
	w.run(1, len(t.nodes))
	w.pop(0)
	t.traces.put(key, w.rec)
	return w.steps
}

// walk is the state of one FillWith.
type walk struct {
	t     *Trie
	r     Recognizer
	alias Aliaser
	mask  Mask
	o     WalkOptions
	// depth is the trie depth of the walk's position; pushed[d] tells whether the byte at
	// depth d was pushed on r (not when r said the state after it was the same as before).
	depth   int
	pushed  []bool
	onStack [257]bool // most vocabularies' longest token is at most 256 bytes
	// level is the number of states pushed on r; stays[level] holds the bytes after which its
	// state was found to stay the same (Aliaser): such a byte met again from that state needs
	// no Advance (inside a JSON string most bytes of a token leave the parser where it was,
	// and a walk meets the same bytes thousands of times).
	level      int
	stays      []staying
	staysStack [16]staying
	child      []*ChildSlice // the child slices of the current first byte's subtree
	parts      []*childPart  // their parts below that byte, in force up to childEnd
	childEnd   int
	steps      int
	rec        *trace // being recorded (nil when none): what the walk does at level 0
}

// pop pops r back to trie depth to.
func (w *walk) pop(to int) {
	n := 0
	for d := to + 1; d <= w.depth; d++ {
		if w.pushed[d] {
			n++
		}
	}
	if n > 0 {
		w.r.Pop(n)
		w.level -= n
	}
	w.depth = to
}

// run walks the nodes [lo, hi), a run of whole subtrees in preorder, from r's current state
// at trie depth w.depth, and leaves r at a depth at least the parent's of lo.
func (w *walk) run(lo, hi int) {
	t, r, mask := w.t, w.r, w.mask
	slices, nodes := w.o.Slices, t.nodes
	for i := lo; i < hi; {
		nd := &nodes[i]
		if d := int(nd.depth) - 1; w.depth > d {
			w.pop(d)
		}
		if i >= w.childEnd {
			w.parts = w.parts[:0]
		}
		if skipped(slices, i) || len(w.parts) > 0 && childSkips(w.parts, i) {
			i = int(nd.end)
			continue
		}
		w.steps++
		rec := w.rec != nil && w.level == 0 // recorded in the trace
		if rec {
			w.rec.steps++
		}
		if nd.end == int32(i+1) { // a leaf: no need to build the state after its byte
			if r.CanAdvance(nd.b) { // a leaf holds tokens
				for _, id := range t.nodeTokens(i) {
					mask.Set(id)
				}
				if rec {
					w.rec.tokens = append(w.rec.tokens, t.nodeTokens(i)...)
				}
			}
			i++
			continue
		}
		switch {
		case w.stays[w.level].has(nd.b):
			w.depth++ // r stays where it is
			w.pushed[w.depth] = false
		case !r.Advance(nd.b):
			i = int(nd.end)
			continue
		default:
			w.depth++
			w.pushed[w.depth] = true
			if w.alias != nil && w.alias.SameAsPreviousWithin(t.maxLen) {
				r.Pop(1)
				w.pushed[w.depth] = false
				w.stays[w.level].add(nd.b)
				break
			}
			if rec {
				w.rec.advances = append(w.rec.advances, int32(i))
				w.rec.steps-- // counted again when the trace is replayed
				rec = false
			}
			w.level++ // a new state: nothing known of its bytes yet
			if w.level == len(w.stays) {
				w.stays = append(w.stays, staying{})
			} else {
				w.stays[w.level] = staying{}
			}
		}
		if nd.hasTok {
			for _, id := range t.nodeTokens(i) {
				mask.Set(id)
			}
			if rec {
				w.rec.tokens = append(w.rec.tokens, t.nodeTokens(i)...)
			}
		}
		// Child slices below a first byte that left r where it was would be the root's:
		// the Slices stand for them.
		if w.depth == 1 && w.level > 0 && w.o.Child != nil && int(nd.end)-i >= MinChildNodes {
			w.child = w.o.Child(w.child[:0])
			w.childEnd = int(nd.end)
			w.parts = w.parts[:0]
			for _, cs := range w.child {
				if cs.t != t { // another vocabulary's: its parts say nothing of this trie
					continue
				}
				p := cs.part(i)
				w.parts = append(w.parts, p)
				p.addTo(mask)
			}
		}
		i++
	}
}

// traceKey returns the key of the walk's trace (its slices, and r's bytes and those after
// which its state stays the same, which become stays[0]) and whether the walk is traced: r
// reports them, there are one to four slices and r accepts enough bytes for a trace to pay.
func (w *walk) traceKey() (traceKey, bool) {
	var k traceKey
	sr, ok := w.r.(StayingReporter)
	if !ok || len(w.o.Slices) == 0 || len(w.o.Slices) > len(k.slices) || len(w.t.nodes) < minTracedTrie {
		return k, false
	}
	k.next, k.stays, ok = sr.StayingBytes(w.t.maxLen, maxKeyAdvances)
	n := 0
	for _, x := range k.next {
		n += bits.OnesCount64(x)
	}
	if !ok || n < minTracedBytes {
		return k, false
	}
	for i, s := range w.o.Slices {
		k.slices[i] = s.id
	}
	w.stays[0] = k.stays
	return k, true
}

// maxKeyAdvances bounds the states a trace key may build: a state whose bytes lead to many
// (the start of a property name among many) is walked without a trace.
const maxKeyAdvances = 16

// A StayingReporter is an Aliaser that tells at once the bytes it accepts and those after
// which its state stays the same within horizon bytes, as CanAdvance and an Advance,
// SameAsPreviousWithin and Pop for each byte would, building at most most states (ok false
// past that).
type StayingReporter interface {
	StayingBytes(horizon, most int) (next, stays [4]uint64, ok bool)
}

// minTracedTrie is the fewest nodes of a trie whose walks are traced: on a small vocabulary's
// trie (the embedded model's 4 096 tokens, 7 719 nodes) a walk's top level is short, and
// asking for its key cost more than replaying saved (masks 5.7–6.1 → 6.9–7.0 µs in a decode
// loop, BenchmarkMask/json/decode).
const minTracedTrie = 1 << 15

// minTracedBytes is the fewest bytes a state must accept for its walks to be traced: a state
// that accepts few walks few nodes.
const minTracedBytes = 32

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

// traceKey names a trace: the slices of the walks that use it (their ids, in order), the bytes
// the recogniser accepts and those after which its state stays the same.
type traceKey struct {
	slices      [4]uint64
	next, stays [4]uint64
}

// trace is what a walk did at the recogniser's top level (no state pushed): the tokens it
// took there, the nodes where the recogniser advanced to a new state (in preorder), and the
// steps it took there, less one for each of those nodes (a replay walks them).
type trace struct {
	tokens   []core.TokenID
	advances []int32
	steps    int
}

// maxCachedTraces bounds the traces a trie keeps; past it the cache starts over.
const maxCachedTraces = 1024

// traceCache holds a trie's traces.
type traceCache struct {
	mu sync.Mutex
	m  map[traceKey]*trace
}

func (c *traceCache) get(k traceKey) *trace {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *traceCache) put(k traceKey, tr *trace) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedTraces {
		c.m = map[traceKey]*trace{}
	}
	c.m[k] = tr
}
