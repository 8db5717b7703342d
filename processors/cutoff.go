package processors

import (
	"math"
	"math/bits"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fastmath"
)

// Helpers shared by the processors that cut the set at a logit threshold computed from the
// set itself (top-nσ, epsilon, eta, mirostat, XTC): the maximum with the usual errors, the
// normaliser, the few largest entries, and the cut.

// finiteMax returns the largest logit of c, or the error core.Candidates reports for the set
// when it is NaN, +Inf or every entry is banned.
func finiteMax(logits []float32, c *core.Candidates) (float32, error) {
	m, _, nan := fastmath.Max(logits)
	if nan || math.IsInf(float64(m), 0) {
		return 0, logitsError(c)
	}
	return m, nil
}

// logNormaliser returns log Σ exp(logit) over logits (whose maximum is m) and the weights
// e[i] = exp(logit[i] − m) in scratch of c, with S = Σ e.
func logNormaliser(c *core.Candidates, logits []float32, m float32) (logZ float64, e []float32, s float64) {
	e = c.ScratchFloats(len(logits))
	s = fastmath.ExpShiftSum(e, logits, m)
	return float64(m) + math.Log(s), e, s
}

// keepFrom keeps the entries of c whose logit is ≥ thr and drops the others; when that would
// keep fewer than minKeep entries it keeps the minKeep most likely instead (c.TopK). A sorted
// set stays sorted (its prefix is kept); a dense row becomes a sparse set in id order. On a
// dense row one vectorised pass (fastmath.MaskAbove) finds the entries.
func keepFrom(c *core.Candidates, thr float32, minKeep int) error {
	// logit ≥ thr ⇔ logit > the float just below thr.
	below := math.Nextafter32(thr, negInf)
	if row := c.Dense(); row != nil {
		out := c.Buffer(len(row))
		w := 0
		var words [maskChunk / 64]uint64
		for base := 0; base < len(row); base += maskChunk {
			end := min(base+maskChunk, len(row))
			fastmath.MaskAbove(words[:], row[base:end], below)
			for k, word := range words[:(end-base+63)/64] {
				for ; word != 0; word &= word - 1 {
					i := base + 64*k + bits.TrailingZeros64(word)
					out[w] = core.Candidate{ID: core.TokenID(i), Logit: row[i]}
					w++
				}
			}
		}
		if w < minKeep {
			return c.TopK(minKeep)
		}
		c.SetItems(out[:w], false)
		return nil
	}
	items := c.Items()
	if c.Sorted() {
		cut := len(items)
		for i, it := range items {
			if !(it.Logit > below) {
				cut = i
				break
			}
		}
		if cut < minKeep {
			return c.TopK(minKeep)
		}
		c.SetItems(items[:cut], true)
		return nil
	}
	n := 0
	for _, it := range items {
		if it.Logit > below {
			n++
		}
	}
	if n < minKeep {
		return c.TopK(minKeep)
	}
	w := 0
	for _, it := range items {
		if it.Logit > below {
			items[w] = it
			w++
		}
	}
	c.SetItems(items[:w], false)
	return nil
}

// topItems returns the (at most) m entries of c with the largest logits, best first (equal
// logits: the lower id first), in scratch of c (ScratchItems); c is not changed. Banned
// entries are never returned. On a dense row the values that cannot enter the selection are
// skipped eight at a time, as core.Candidates.TopK does, so the cost is about one memory pass.
func topItems(c *core.Candidates, m int) []core.Candidate {
	n := c.Len()
	h := c.ScratchItems(min(m, n))[:0]
	if m <= 0 {
		return h
	}
	if c.Sorted() {
		for _, it := range c.Items() {
			if len(h) == m || !(it.Logit > negInf) {
				break
			}
			h = append(h, it)
		}
		return h
	}
	push := func(it core.Candidate) {
		if len(h) < m {
			h = append(h, it)
			heapUp(h, len(h)-1)
		} else if ranksBelow(h[0], it) {
			h[0] = it
			heapDown(h, 0, len(h))
		}
	}
	if row := c.Dense(); row != nil {
		thr := negInf
		for i := 0; ; i++ {
			i += fastmath.IndexAbove(row[i:], thr)
			if i >= len(row) {
				break
			}
			if v := row[i]; v == v { // NaN is the caller's to report
				push(core.Candidate{ID: core.TokenID(i), Logit: v})
				if len(h) == m {
					thr = h[0].Logit
				}
			}
		}
	} else {
		for _, it := range c.Items() {
			if it.Logit > negInf {
				push(it)
			}
		}
	}
	// Heap sort: the worst entry is at the root, so moving it to the end leaves the best first.
	for end := len(h) - 1; end > 0; end-- {
		h[0], h[end] = h[end], h[0]
		heapDown(h, 0, end)
	}
	return h
}

// ranksBelow reports whether a ranks below b: a lower logit, or an equal one and a larger id.
func ranksBelow(a, b core.Candidate) bool {
	return a.Logit < b.Logit || (a.Logit == b.Logit && a.ID > b.ID)
}

// heapUp and heapDown keep h[:n] a heap with the lowest-ranked entry at the root.
func heapUp(h []core.Candidate, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !ranksBelow(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func heapDown(h []core.Candidate, i, n int) {
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && ranksBelow(h[r], h[l]) {
			m = r
		}
		if !ranksBelow(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// entropy returns H = −Σ p log p (nats) of the set whose weights e = exp(logit − m) sum to s,
// and how many entries are not banned: with log p(i) = logit(i) − m − ln s,
// H = ln s − (1/s) Σ e(i)·(logit(i) − m). Banned entries (e = 0) contribute nothing. Blocks of
// 256 are summed in float32 over four independent lanes, the block sums in float64.
func entropy(logits, e []float32, m float32, s float64) (h float64, finite int) {
	var acc float64
	e = e[:len(logits)]
	for base := 0; base < len(logits); base += 256 {
		end := min(base+256, len(logits))
		x, w := logits[base:end], e[base:end]
		var a0, a1, a2, a3 float32
		i := 0
		for ; i+4 <= len(x); i += 4 {
			if x[i] > negInf && x[i+1] > negInf && x[i+2] > negInf && x[i+3] > negInf {
				a0 += w[i] * (x[i] - m)
				a1 += w[i+1] * (x[i+1] - m)
				a2 += w[i+2] * (x[i+2] - m)
				a3 += w[i+3] * (x[i+3] - m)
				finite += 4
				continue
			}
			for k := i; k < i+4; k++ {
				if x[k] > negInf {
					a0 += w[k] * (x[k] - m)
					finite++
				}
			}
		}
		for ; i < len(x); i++ {
			if x[i] > negInf {
				a0 += w[i] * (x[i] - m)
				finite++
			}
		}
		acc += float64(a0) + float64(a1) + float64(a2) + float64(a3)
	}
	return math.Log(s) - acc/s, finite
}
