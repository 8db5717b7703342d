package processors_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// spacedRow returns n logits: one 0, then −s, −2s, … in groups of tie equal logits (rank
// r ≥ 1 gets −s·(1 + ⌊(r−1)/tie⌋)), assigned to the ids in a shuffled order; and the ids by
// rank (descending logit, equal logits by the lower id).
func spacedRow(n int, s float64, tie int, seed uint64) (row []float32, byRank []int) {
	perm := rand.New(rand.NewPCG(seed, uint64(n))).Perm(n)
	row = make([]float32, n)
	for r, id := range perm {
		if r > 0 {
			row[id] = float32(-s * float64(1+(r-1)/tie))
		}
	}
	byRank = make([]int, n)
	for i := range byRank {
		byRank[i] = i
	}
	slices.SortStableFunc(byRank, func(a, b int) int {
		switch {
		case row[a] > row[b]:
			return -1
		case row[a] < row[b]:
			return 1
		}
		return a - b
	})
	return row, byRank
}

// Every filter with a min_keep keeps exactly the min_keep largest logits (equal logits: the
// lower ids) when it alone would keep fewer, however far below the maximum they lie: past 22
// nats (typical-p's histogram), past 87 (where float32 probabilities underflow to 0), past the
// float32 range of a difference. Each filter is set so that alone it keeps the top token only.
func TestMinKeepKeepsTheLargestLogits(t *testing.T) {
	filters := []struct {
		name  string
		build func(minKeep int) (core.LogitsProcessor, error)
	}{
		{"top_k 1", func(k int) (core.LogitsProcessor, error) { return processors.NewTopKMinKeep(1, k) }},
		{"top_p 0.5", func(k int) (core.LogitsProcessor, error) { return processors.NewTopP(0.5, k) }},
		{"top_p 0", func(k int) (core.LogitsProcessor, error) { return processors.NewTopP(0, k) }},
		{"top_p 0.5 exclusive", func(k int) (core.LogitsProcessor, error) {
			return processors.NewTopPBoundary(0.5, k, processors.Exclusive)
		}},
		{"typical_p 0.5", func(k int) (core.LogitsProcessor, error) { return processors.NewTypicalP(0.5, k) }},
		{"min_p 0.5", func(k int) (core.LogitsProcessor, error) { return processors.NewMinP(0.5, k) }},
		{"epsilon_cutoff 0.1", func(k int) (core.LogitsProcessor, error) { return processors.NewEpsilonCutoff(0.1, k) }},
		{"eta_cutoff 0.1", func(k int) (core.LogitsProcessor, error) { return processors.NewEtaCutoff(0.1, k) }},
	}
	rows := []struct {
		n    int
		s    float64
		tie  int
		name string
	}{
		{5, 100, 1, "spacing 100"},
		{300, 100, 1, "spacing 100, 300 tokens"},
		{6000, 100, 1, "spacing 100, 6000 tokens"},
		{300, 25, 1, "spacing 25 (past typical-p's last bucket)"},
		{300, 90, 1, "spacing 90 (past float32 exp underflow)"},
		{300, 1e4, 1, "spacing 1e4"},
		{300, 1e35, 1, "spacing 1e35 (differences beyond float32)"},
		{300, 100, 3, "spacing 100, ties of 3"},
		{300, 1e6, 4, "spacing 1e6, ties of 4"},
		{7, 100, 6, "all tied below the top"},
	}
	for _, f := range filters {
		for _, rc := range rows {
			row, byRank := spacedRow(rc.n, rc.s, rc.tie, 11)
			for _, minKeep := range []int{1, 2, 3, 5, rc.n} {
				p, err := f.build(minKeep)
				if err != nil {
					t.Fatal(err)
				}
				want := slices.Clone(byRank[:min(minKeep, rc.n)])
				slices.Sort(want)
				for _, form := range forms {
					name := fmt.Sprintf("%s, %s, min_keep %d, %s", f.name, rc.name, minKeep, form)
					if got := keptIDs(t, p, nil, row, form); !slices.Equal(got, want) {
						t.Errorf("%s: kept %v, want %v", name, short(got), short(want))
					}
				}
			}
		}
	}
}

// short abbreviates a long id list for error messages.
func short(ids []int) string {
	if len(ids) <= 12 {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v … (%d ids)", ids[:12], len(ids))
}

// min_keep counts tokens not banned: banned ones are never kept to make up the number.
func TestMinKeepNeverKeepsBannedTokens(t *testing.T) {
	row := []float32{ninf, -200, 0, ninf, -100}
	for _, p := range []core.LogitsProcessor{
		must(processors.NewTopKMinKeep(1, 5)),
		must(processors.NewTopP(0.5, 5)),
		must(processors.NewTypicalP(0.5, 5)),
		must(processors.NewTopPBoundary(0, 5, processors.Exclusive)),
		must(processors.NewMinP(0.5, 5)),
		must(processors.NewEpsilonCutoff(0.1, 5)),
		must(processors.NewEtaCutoff(0.1, 5)),
	} {
		for _, f := range forms {
			if got := keptIDs(t, p, nil, row, f); !slices.Equal(got, []int{1, 2, 4}) {
				t.Errorf("%s %s: kept %v, want [1 2 4]", p.Name(), f, got)
			}
		}
	}
}

// XTC's min_keep is a condition, not a count to fill: it acts only if at least min_keep
// tokens (not banned, whatever their probability) remain.
func TestXTCMinKeepWithFarTokens(t *testing.T) {
	// Tokens 3 and 0 tie at the top (p = 0.5 each); the others are 100 and 200 below, with
	// probabilities that round to 0. Acting removes token 0 (the larger id of a tie stays).
	row := []float32{0, -100, -200, 0, ninf}
	for _, tc := range []struct {
		minKeep int
		want    []int
	}{
		{1, []int{1, 2, 3}},
		{3, []int{1, 2, 3}},
		{4, []int{0, 1, 2, 3}}, // only 3 would remain: XTC does not act
	} {
		p := must(processors.NewXTC(0.1, 1, tc.minKeep))
		for _, f := range forms {
			if got := keptIDs(t, p, nil, row, f); !slices.Equal(got, tc.want) {
				t.Errorf("min_keep %d %s: kept %v, want %v", tc.minKeep, f, got, tc.want)
			}
		}
	}
}

// top_k: max(k, min_keep) tokens, and k = 0 still disables it.
func TestTopKMinKeep(t *testing.T) {
	row := []float32{1, 5, 3, 5, 2, 4}
	for _, tc := range []struct {
		k, minKeep int
		want       []int
	}{
		{2, 1, []int{1, 3}},
		{2, 3, []int{1, 3, 5}},
		{4, 3, []int{1, 2, 3, 5}},
		{0, 3, []int{0, 1, 2, 3, 4, 5}},
		{1, 10, []int{0, 1, 2, 3, 4, 5}},
	} {
		p := must(processors.NewTopKMinKeep(tc.k, tc.minKeep))
		for _, f := range forms {
			if got := keptIDs(t, p, nil, row, f); !slices.Equal(got, tc.want) {
				t.Errorf("k %d min_keep %d %s: kept %v, want %v", tc.k, tc.minKeep, f, got, tc.want)
			}
		}
	}
	if _, err := processors.NewTopKMinKeep(3, 0); err == nil {
		t.Error("min_keep 0 accepted")
	} else {
		wantParamError(t, err, "min_keep")
	}
}

// top_p with p = 0 keeps the single most likely token (the lowest id of a tie), as llama.cpp.
func TestTopPZeroKeepsTheMostLikely(t *testing.T) {
	for _, tc := range []struct {
		row  []float32
		want []int
	}{
		{[]float32{1, 3, 2}, []int{1}},
		{[]float32{3, 1, 3, 3}, []int{0}},
		{[]float32{-1e30, 0, 1e-6}, []int{2}},
	} {
		for _, b := range []processors.Boundary{processors.Inclusive, processors.Exclusive} {
			p := must(processors.NewTopPBoundary(0, 1, b))
			for _, f := range forms {
				if got := keptIDs(t, p, nil, tc.row, f); !slices.Equal(got, tc.want) {
					t.Errorf("%v %s %s: kept %v, want %v", tc.row, b, f, got, tc.want)
				}
			}
		}
	}
}

func ExampleNewTopKMinKeep() {
	// k = 1 with a min_keep of 3 carried over from another engine keeps max(1, 3) tokens.
	p, _ := processors.NewTopKMinKeep(1, 3)
	c := core.NewCandidates([]float32{0.5, 3, 1, 2})
	_ = p.Process(nil, c)
	fmt.Println(c.Items())
	// Output: [{1 3} {3 2} {2 1}]
}

func ExampleTopP_minKeep() {
	// The first token holds all the mass; min_keep 2 adds the next largest logit, although
	// its probability (e^-200) rounds to 0 and token 1 lies further below.
	p, _ := processors.NewTopP(0.9, 2)
	c := core.NewCandidates([]float32{0, -300, -200})
	_ = p.Process(nil, c)
	fmt.Println(c.Items())
	// Output: [{0 0} {2 -200}]
}
