package processors_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

var (
	inf  = float32(math.Inf(1))
	ninf = float32(math.Inf(-1))
	nan  = float32(math.NaN())
)

// newSeq returns a sequence of a test model with the given vocabulary size, holding prompt
// followed by generated.
func newSeq(t testing.TB, vocab int, prompt []core.TokenID, generated ...core.TokenID) *core.Sequence {
	t.Helper()
	m, tok := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: vocab, ContextLength: 1 << 16})
	p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	s, err := core.NewSession(context.Background(), p, core.Request{
		PromptTokens: prompt, MaxNewTokens: 1 << 15, IgnoreEOS: true, Seed: core.SeedOf(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.Prefill()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range generated {
		if err := s.Append(q, core.Choice{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return q
}

// form is one way of presenting the same logits to a processor.
type form int

const (
	dense form = iota
	sparseUnsorted
	sparseSorted
)

var forms = []form{dense, sparseUnsorted, sparseSorted}

func (f form) String() string { return [...]string{"dense", "sparse", "sorted"}[f] }

// candidates presents row in form f; the sparse forms hold every token, the unsorted one in
// a shuffled order.
func candidates(row []float32, f form) *core.Candidates {
	c := core.NewCandidates(slices.Clone(row))
	switch f {
	case sparseUnsorted:
		items := c.Items()
		r := rand.New(rand.NewPCG(uint64(len(row)), 7))
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		c.SetItems(items, false)
	case sparseSorted:
		c.Sort()
	}
	return c
}

// logitsByID returns the set as a full row: absent tokens are -Inf.
func logitsByID(c *core.Candidates, vocab int) []float32 {
	out := make([]float32, vocab)
	if d := c.Dense(); d != nil {
		copy(out, d)
		return out
	}
	for i := range out {
		out[i] = ninf
	}
	for _, it := range c.Items() {
		out[it.ID] = it.Logit
	}
	return out
}

// kept returns the ids with a logit above -Inf, ascending.
func kept(c *core.Candidates, vocab int) []int {
	var ids []int
	for id, v := range logitsByID(c, vocab) {
		if v > ninf || v != v {
			ids = append(ids, id)
		}
	}
	return ids
}

func randomRow(r *rand.Rand, n int, sigma float64) []float32 {
	row := make([]float32, n)
	for i := range row {
		row[i] = float32(r.NormFloat64() * sigma)
	}
	return row
}

func checkSorted(t *testing.T, c *core.Candidates) {
	t.Helper()
	if !c.Sorted() {
		return
	}
	items := c.Items()
	for i := 1; i < len(items); i++ {
		if items[i].Logit > items[i-1].Logit {
			t.Fatalf("set marked sorted but item %d (%v) > item %d (%v)", i, items[i], i-1, items[i-1])
		}
	}
}

func wantParamError(t *testing.T, err error, param string) {
	t.Helper()
	var pe *core.ParamError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *core.ParamError for %s", err, param)
	}
	if pe.Param != param || pe.Reason == "" {
		t.Fatalf("ParamError %+v, want Param %q with a reason", pe, param)
	}
}

// ---- float64 references: the formulas, computed independently of the processors ----

func toF64(row []float32) []float64 {
	out := make([]float64, len(row))
	for i, v := range row {
		out[i] = float64(v)
	}
	return out
}

func softmax(x []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	out := make([]float64, len(x))
	var s float64
	for i, v := range x {
		if v > math.Inf(-1) {
			out[i] = math.Exp(v - m)
			s += out[i]
		}
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// order returns the ids sorted by ascending key (ties: lower id).
func order(key []float64) []int {
	ids := make([]int, len(key))
	for i := range ids {
		ids[i] = i
	}
	slices.SortStableFunc(ids, func(a, b int) int {
		switch {
		case key[a] < key[b]:
			return -1
		case key[a] > key[b]:
			return 1
		}
		return 0
	})
	return ids
}

// keepFirst bans every token but the first n of ids.
func keepFirst(x []float64, ids []int, n int) []float64 {
	out := slices.Clone(x)
	for _, id := range ids[min(n, len(ids)):] {
		out[id] = math.Inf(-1)
	}
	return out
}

func negated(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = -v
	}
	return out
}

func finiteCount(x []float64) int {
	n := 0
	for _, v := range x {
		if v > math.Inf(-1) {
			n++
		}
	}
	return n
}

func refTemperature(x []float64, t float64) []float64 {
	out := slices.Clone(x)
	if t == 0 {
		best := 0
		for i, v := range x {
			if v > x[best] {
				best = i
			}
		}
		for i := range out {
			if i != best {
				out[i] = math.Inf(-1)
			}
		}
		return out
	}
	for i := range out {
		out[i] /= t
	}
	return out
}

func refTopK(x []float64, k int) []float64 {
	if k == 0 || k >= len(x) {
		return slices.Clone(x)
	}
	return keepFirst(x, order(negated(x)), k)
}

// refMass keeps the shortest prefix of ids whose probability reaches p, at least minKeep. It
// also returns how close the cumulative sums around the cut come to p, so tests can avoid
// cases that float32 rounding could decide either way.
func refMass(x []float64, ids []int, p float64, minKeep int) ([]float64, float64) {
	probs := softmax(x)
	cum := 0.0
	margin := math.Inf(1)
	for r, id := range ids {
		cum += probs[id]
		margin = math.Min(margin, math.Abs(cum-p))
		if cum >= p && r+1 >= minKeep {
			return keepFirst(x, ids, r+1), margin
		}
	}
	return slices.Clone(x), margin
}

func refTopP(x []float64, p float64, minKeep int) ([]float64, float64) {
	if p >= 1 {
		return slices.Clone(x), math.Inf(1)
	}
	return refMass(x, order(negated(x)), p, minKeep)
}

func refTypical(x []float64, p float64, minKeep int) ([]float64, float64) {
	if p >= 1 {
		return slices.Clone(x), math.Inf(1)
	}
	probs := softmax(x)
	var h float64
	for _, q := range probs {
		if q > 0 {
			h -= q * math.Log(q)
		}
	}
	d := make([]float64, len(x))
	for i, q := range probs {
		d[i] = math.Abs(-math.Log(q) - h)
	}
	return refMass(x, order(d), p, minKeep)
}

func refMinP(x []float64, p float64, minKeep int) []float64 {
	if p == 0 {
		return slices.Clone(x)
	}
	probs := softmax(x)
	pmax := slices.Max(probs)
	out := slices.Clone(x)
	n := 0
	for i, q := range probs {
		if q >= p*pmax && q > 0 {
			n++
		} else {
			out[i] = math.Inf(-1)
		}
	}
	if n < minKeep {
		return refTopK(x, minKeep)
	}
	return out
}

// refPenalties applies the three penalties to x for a sequence of tokens whose first promptLen
// are the prompt, counting the last lastN tokens of the scope (-1: all of them; 0: none, the
// penalties are off).
func refPenalties(x []float64, tokens []core.TokenID, promptLen int, repeat, freq, presence float64, generatedOnly bool, lastN int) []float64 {
	if lastN == 0 {
		return slices.Clone(x)
	}
	start := 0
	if generatedOnly {
		start = promptLen
	}
	if lastN > 0 {
		start = max(start, len(tokens)-lastN)
	}
	counts := map[core.TokenID]int{}
	for _, id := range tokens[min(start, len(tokens)):] {
		counts[id]++
	}
	out := slices.Clone(x)
	for id, n := range counts {
		v := out[id]
		if v > 0 {
			v /= repeat
		} else {
			v *= repeat
		}
		out[id] = v - freq*float64(n) - presence
	}
	return out
}
