package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/loomlm/loom/internal/fastmath"
)

// Candidates is the next-token distribution of one sequence at one step, as logits, in one of
// two forms:
//
//   - dense: the whole vocabulary, Dense()[id] is the logit of token id. A fresh row from the
//     model starts dense, so a processor that reshapes every logit (temperature, a bias) or a
//     few of them (penalties, bans) touches the row in place with no copy.
//   - sparse: a list of (id, logit) items, possibly sorted by descending logit (Sorted) and
//     possibly truncated to the tokens still allowed. Truncating processors (top-k, top-p, …)
//     turn a dense set into a sparse one, so later processors touch k items, not the vocabulary.
//
// A logit of -Inf means the token is banned. Probabilities are softmax over the logits of the
// set: tokens absent from a sparse set have probability zero.
//
// A Candidates value owns reusable buffers and is reused step after step; it is not safe for
// concurrent use.
type Candidates struct {
	dense  []float32
	items  []Candidate
	sorted bool

	buf    []Candidate // backing store for items, capacity = vocabulary size
	probs  []float32   // softmax scratch, capacity = vocabulary size
	ownRow []float32   // a dense row owned by the set, for CopyFrom

	// Scratch for processors (ScratchFloats, ScratchItems), never used by the set itself.
	userFloats []float32
	userItems  []Candidate
}

// NewCandidates returns a set that starts dense over row. Processors may modify row in place.
func NewCandidates(row []float32) *Candidates {
	c := &Candidates{}
	c.Reset(row)
	return c
}

// Reset makes the set dense over row, forgetting any previous content. Buffers are kept.
func (c *Candidates) Reset(row []float32) {
	c.dense = row
	c.items = c.items[:0]
	c.sorted = false
}

// IsDense reports whether the set is in dense form.
func (c *Candidates) IsDense() bool { return c.dense != nil }

// Dense returns the full-vocabulary logits while the set is dense, and nil once it is sparse.
// Writes to the returned slice change the set.
func (c *Candidates) Dense() []float32 { return c.dense }

// Len is the number of entries: the vocabulary size when dense, the item count when sparse.
// Banned (-Inf) entries count.
func (c *Candidates) Len() int {
	if c.dense != nil {
		return len(c.dense)
	}
	return len(c.items)
}

// Sorted reports whether the set is sparse and sorted by descending logit.
func (c *Candidates) Sorted() bool { return c.dense == nil && c.sorted }

// Items returns the set as (id, logit) items, converting a dense set to sparse first (O(V),
// in id order). Writes to the items' logits change the set; to drop or reorder items, build
// the new list in the returned slice and call SetItems.
func (c *Candidates) Items() []Candidate {
	if c.dense != nil {
		buf := c.Buffer(len(c.dense))
		for i, v := range c.dense {
			buf[i] = Candidate{ID: TokenID(i), Logit: v}
		}
		c.SetItems(buf, false)
	}
	return c.items
}

// Buffer returns a scratch slice of n items backed by the set's own storage, for building a
// sparse set from a dense one without allocating (see SetItems). While the set is sparse, its
// items live in this same storage: a processor working on a sparse set compacts c.Items() in
// place instead.
func (c *Candidates) Buffer(n int) []Candidate {
	if cap(c.buf) < n {
		c.buf = make([]Candidate, n)
	}
	return c.buf[:n]
}

// SetItems makes the set sparse with the given items; sorted states whether they are in
// descending logit order. items is kept, not copied: pass a slice of Buffer or of Items.
func (c *Candidates) SetItems(items []Candidate, sorted bool) {
	c.dense = nil
	c.items = items
	c.sorted = sorted
}

// MarkUnsorted records that a processor changed logits of a sparse set in a way that may break
// descending order (an in-place penalty, say).
func (c *Candidates) MarkUnsorted() { c.sorted = false }

// Sort makes the set sparse and sorted by descending logit (ties by ascending id, so the
// order is deterministic). It costs O(n log n) once; a sorted set stays sorted.
func (c *Candidates) Sort() {
	items := c.Items()
	if c.sorted {
		return
	}
	slices.SortFunc(items, func(a, b Candidate) int {
		switch {
		case a.Logit > b.Logit:
			return -1
		case a.Logit < b.Logit:
			return 1
		default:
			return int(a.ID) - int(b.ID)
		}
	})
	c.sorted = true
}

// Logits returns the logits of the set as a slice aligned with Dense (when dense) or Items
// (when sparse). It is a view for reading; it allocates nothing when dense and reuses the
// probability scratch when sparse, so it is valid until the next call of Logits or Probs.
func (c *Candidates) Logits() []float32 {
	if c.dense != nil {
		return c.dense
	}
	out := c.scratch(len(c.items))
	for i, it := range c.items {
		out[i] = it.Logit
	}
	return out
}

func (c *Candidates) scratch(n int) []float32 {
	if cap(c.probs) < n {
		c.probs = make([]float32, n, max(n, len(c.buf)))
	}
	return c.probs[:n]
}

// Probs computes the softmax of the set into a reused buffer aligned with Dense or Items and
// returns it with the log of the normaliser (logsumexp of the logits): log p(i) = logit(i) −
// logZ. It fails on a NaN or +Inf logit and when every entry is banned (-Inf); the error
// names the case. The buffer is valid until the next Probs or Logits call.
func (c *Candidates) Probs() (probs []float32, logZ float32, err error) {
	n := c.Len()
	if n == 0 {
		return nil, 0, ErrNoCandidates
	}
	var maxLogit float32
	if c.dense != nil {
		m, _, nan := fastmath.Max(c.dense)
		if nan {
			return nil, 0, c.nanError()
		}
		maxLogit = m
		probs = c.scratch(n)
		if err := checkMax(maxLogit); err != nil {
			return nil, 0, err
		}
		sum := fastmath.ExpShiftSum(probs, c.dense, maxLogit)
		return normalise(probs, sum, maxLogit)
	}
	logits := c.Logits() // fills the scratch with the item logits
	m, _, nan := fastmath.Max(logits)
	if nan {
		return nil, 0, c.nanError()
	}
	maxLogit = m
	if err := checkMax(maxLogit); err != nil {
		return nil, 0, err
	}
	sum := fastmath.ExpShiftSum(logits, logits, maxLogit)
	return normalise(logits, sum, maxLogit)
}

func checkMax(m float32) error {
	if math.IsInf(float64(m), 1) {
		return fmt.Errorf("%w: a logit is +Inf", ErrInvalidLogits)
	}
	if math.IsInf(float64(m), -1) {
		return ErrNoCandidates
	}
	return nil
}

func normalise(probs []float32, sum float64, maxLogit float32) ([]float32, float32, error) {
	fastmath.Scale(probs, float32(1/sum))
	return probs, maxLogit + float32(math.Log(sum)), nil
}

func (c *Candidates) nanError() error {
	if c.dense != nil {
		for i, v := range c.dense {
			if v != v {
				return fmt.Errorf("%w: logit of token %d is NaN", ErrInvalidLogits, i)
			}
		}
	}
	for _, it := range c.items {
		if it.Logit != it.Logit {
			return fmt.Errorf("%w: logit of token %d is NaN", ErrInvalidLogits, it.ID)
		}
	}
	return fmt.Errorf("%w: NaN logit", ErrInvalidLogits)
}

// Argmax returns the token with the largest logit (the lowest id among equal ones). It fails
// like Probs on NaN, +Inf or an all-banned set.
func (c *Candidates) Argmax() (TokenID, error) {
	if c.dense != nil {
		m, i, nan := fastmath.Max(c.dense)
		if nan {
			return 0, c.nanError()
		}
		if err := checkMax(m); err != nil {
			return 0, err
		}
		return TokenID(i), nil
	}
	if len(c.items) == 0 {
		return 0, ErrNoCandidates
	}
	best := -1
	for i, it := range c.items {
		if it.Logit != it.Logit {
			return 0, c.nanError()
		}
		if best < 0 || it.Logit > c.items[best].Logit || (it.Logit == c.items[best].Logit && it.ID < c.items[best].ID) {
			best = i
		}
	}
	if err := checkMax(c.items[best].Logit); err != nil {
		return 0, err
	}
	return c.items[best].ID, nil
}

// Logit returns the logit of token id and whether the set contains it (O(1) dense, O(n)
// sparse).
func (c *Candidates) Logit(id TokenID) (float32, bool) {
	if c.dense != nil {
		if id < 0 || int(id) >= len(c.dense) {
			return 0, false
		}
		return c.dense[id], true
	}
	for _, it := range c.items {
		if it.ID == id {
			return it.Logit, true
		}
	}
	return 0, false
}

// ID returns the token id of entry i (i itself when dense).
func (c *Candidates) ID(i int) TokenID {
	if c.dense != nil {
		return TokenID(i)
	}
	return c.items[i].ID
}

// CopyFrom makes c an independent copy of src, reusing c's buffers.
func (c *Candidates) CopyFrom(src *Candidates) {
	if src.dense != nil {
		row := c.scratchDense(len(src.dense))
		copy(row, src.dense)
		c.dense = row
		c.items = c.items[:0]
		c.sorted = false
		return
	}
	buf := c.Buffer(len(src.items))
	copy(buf, src.items)
	c.SetItems(buf, src.sorted)
}

// scratchDense returns a float32 row owned by c, separate from the probability scratch.
func (c *Candidates) scratchDense(n int) []float32 {
	if cap(c.ownRow) < n {
		c.ownRow = make([]float32, n)
	}
	return c.ownRow[:n]
}

// ScratchFloats returns n float32 values of scratch storage owned by the set, for a processor's
// temporary use while it works on the set (exponentials, keys). No method of Candidates uses
// it, so it stays valid across them until the next ScratchFloats call; its contents on return
// are undefined. It allocates only when n exceeds every earlier request (then at least
// doubling), so a processor asking for what it needs each step settles to no allocation.
func (c *Candidates) ScratchFloats(n int) []float32 {
	if cap(c.userFloats) < n {
		c.userFloats = make([]float32, max(n, 2*cap(c.userFloats)))
	}
	return c.userFloats[:n]
}

// ScratchItems is ScratchFloats for items: n Candidates of scratch storage, separate from the
// set's own items and from Buffer.
func (c *Candidates) ScratchItems(n int) []Candidate {
	if cap(c.userItems) < n {
		c.userItems = make([]Candidate, max(n, 2*cap(c.userItems)))
	}
	return c.userItems[:n]
}

// TopK keeps the k entries with the largest logits (among equal logits, the lower ids) and
// leaves the set sparse and sorted by descending logit. Banned (-Inf) entries are dropped even
// when fewer than k others remain. When k ≥ Len the set is left as it is, unexamined.
//
// It selects without sorting the set: one pass keeps a heap of the best k seen so far, and
// on a dense row the values that cannot enter the heap are skipped eight at a time
// (fastmath.IndexAbove), so the cost is about one memory pass plus O(k log k · log(V/k)) for
// random logits. A sorted set is cut in O(k).
//
// It fails with ErrInvalidLogits naming the token when it meets a NaN logit, and with
// ErrNoCandidates when nothing is kept (k ≤ 0, or every entry banned).
func (c *Candidates) TopK(k int) error {
	n := c.Len()
	if k >= n {
		return nil
	}
	if k <= 0 {
		return fmt.Errorf("%w: top-k with k = %d", ErrNoCandidates, k)
	}
	if c.dense != nil {
		return c.topKDense(k)
	}
	items := c.items
	if c.sorted {
		cut := 0
		for ; cut < k; cut++ {
			v := items[cut].Logit
			if v != v {
				return nanAt(items[cut].ID)
			}
			if v == negInf {
				break
			}
		}
		if cut == 0 {
			return ErrNoCandidates
		}
		c.items = items[:cut]
		return nil
	}
	// Build the heap in the front of items while reading further on: position len(h) ≤ i.
	h := items[:0]
	for i := range items {
		it := items[i]
		if !(it.Logit > negInf) {
			if it.Logit != it.Logit {
				return nanAt(it.ID)
			}
			continue // banned
		}
		if len(h) < k {
			h = append(h, it)
			siftUp(h, len(h)-1)
		} else if worse(h[0], it) {
			h[0] = it
			siftDown(h, 0, len(h))
		}
	}
	return c.finishTopK(h)
}

var negInf = float32(math.Inf(-1))

func nanAt(id TokenID) error {
	return fmt.Errorf("%w: logit of token %d is NaN", ErrInvalidLogits, id)
}

func (c *Candidates) topKDense(k int) error {
	row := c.dense
	h := c.Buffer(min(k, len(row)))[:0] // the heap holds k items at most
	threshold := negInf
	for i := 0; ; i++ {
		i += fastmath.IndexAbove(row[i:], threshold)
		if i >= len(row) {
			break
		}
		v := row[i]
		if v != v {
			return nanAt(TokenID(i))
		}
		// Scanning in id order, a value equal to the heap's worst has a larger id and loses
		// the tie, so only values strictly above the threshold come here.
		if len(h) < k {
			h = append(h, Candidate{ID: TokenID(i), Logit: v})
			siftUp(h, len(h)-1)
			if len(h) == k {
				threshold = h[0].Logit
			}
		} else {
			h[0] = Candidate{ID: TokenID(i), Logit: v}
			siftDown(h, 0, len(h))
			threshold = h[0].Logit
		}
	}
	return c.finishTopK(h)
}

// finishTopK sorts the heap h (the worst entry at its root) best first and makes it the set.
func (c *Candidates) finishTopK(h []Candidate) error {
	if len(h) == 0 {
		c.SetItems(h, true)
		return ErrNoCandidates
	}
	for end := len(h) - 1; end > 0; end-- {
		h[0], h[end] = h[end], h[0]
		siftDown(h, 0, end)
	}
	c.SetItems(h, true)
	return nil
}

// worse reports whether a ranks below b: a lower logit, or an equal logit and a larger id.
func worse(a, b Candidate) bool {
	return a.Logit < b.Logit || (a.Logit == b.Logit && a.ID > b.ID)
}

// siftUp and siftDown maintain h[:n] as a heap with the worst entry at the root.
func siftUp(h []Candidate, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !worse(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func siftDown(h []Candidate, i, n int) {
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && worse(h[r], h[l]) {
			m = r
		}
		if !worse(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
