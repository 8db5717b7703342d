package processors

import (
	"math"
	"slices"

	"github.com/loomlm/loom/core"
)

var negInf = float32(math.Inf(-1))

// tokensOf returns seq's tokens and prompt length; a nil sequence has none.
func tokensOf(seq *core.Sequence) (tokens []core.TokenID, promptLen int) {
	if seq == nil {
		return nil, 0
	}
	return seq.Tokens(), seq.PromptLen()
}

// banner bans tokens in a candidate set: on a dense row it sets their logits to -Inf at once;
// on a sparse set it collects them (in scratch of the set) and removes them in flush, which
// keeps a sorted set sorted.
type banner struct {
	c    *core.Candidates
	row  []float32
	list []core.Candidate
}

// newBanner prepares to ban at most max tokens in c.
func newBanner(c *core.Candidates, max int) banner {
	if row := c.Dense(); row != nil {
		return banner{c: c, row: row}
	}
	return banner{c: c, list: c.ScratchItems(max)[:0]}
}

func (b *banner) ban(id core.TokenID) {
	if b.row != nil {
		if id >= 0 && int(id) < len(b.row) {
			b.row[id] = negInf
		}
		return
	}
	b.list = append(b.list, core.Candidate{ID: id})
}

// flush removes the collected tokens from a sparse set.
func (b *banner) flush() {
	if b.row != nil || len(b.list) == 0 {
		return
	}
	removeIDs(b.c, b.list)
}

// removeIDs drops the items of c (sparse) whose id is among ids[i].ID. ids is reordered.
func removeIDs(c *core.Candidates, ids []core.Candidate) {
	items := c.Items()
	if len(ids) > 8 {
		slices.SortFunc(ids, func(a, b core.Candidate) int { return int(a.ID) - int(b.ID) })
	}
	w := 0
	for _, it := range items {
		if !containsID(ids, it.ID) {
			items[w] = it
			w++
		}
	}
	c.SetItems(items[:w], c.Sorted())
}

// containsID looks id up in ids: a linear scan for a few, a binary search when there are more
// than 8 (ids is then sorted by removeIDs).
func containsID(ids []core.Candidate, id core.TokenID) bool {
	if len(ids) <= 8 {
		for _, x := range ids {
			if x.ID == id {
				return true
			}
		}
		return false
	}
	_, ok := slices.BinarySearchFunc(ids, id, func(x core.Candidate, id core.TokenID) int { return int(x.ID) - int(id) })
	return ok
}

// logitsError returns the error core.Candidates reports for the set: a NaN or +Inf logit, or
// every entry banned. Processors call it once they have seen that the maximum is not finite.
func logitsError(c *core.Candidates) error {
	if _, err := c.Argmax(); err != nil {
		return err
	}
	return core.ErrInvalidLogits
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }
