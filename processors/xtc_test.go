package processors_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

func TestXTCByHand(t *testing.T) {
	// Probabilities exactly 0.4, 0.3, 0.2, 0.1; probability 1, so it acts at every step.
	row := lnProbs(0.4, 0.3, 0.2, 0.1)
	for _, tc := range []struct {
		threshold float64
		minKeep   int
		want      []int
		reason    string
	}{
		{0.25, 1, []int{1, 2, 3}, "A = {0.4, 0.3}: 0.4 removed, 0.3 (the least probable of A) kept"},
		{0.15, 1, []int{2, 3}, "A = {0.4, 0.3, 0.2}: 0.4 and 0.3 removed"},
		{0.35, 1, []int{0, 1, 2, 3}, "A = {0.4}: a single top choice is kept"},
		{0.45, 1, []int{0, 1, 2, 3}, "A is empty"},
		{0.6, 1, []int{0, 1, 2, 3}, "a threshold above 0.5 disables XTC"},
		{0.15, 2, []int{2, 3}, "2 tokens remain: enough for min_keep 2"},
		{0.15, 3, []int{0, 1, 2, 3}, "2 tokens would remain, fewer than min_keep 3: unchanged"},
	} {
		for _, f := range forms {
			p := must(processors.NewXTC(tc.threshold, 1, tc.minKeep))
			if got := keptIDs(t, p, nil, row, f); !slices.Equal(got, tc.want) {
				t.Errorf("threshold %v min_keep %d (%s) %s: kept %v, want %v", tc.threshold, tc.minKeep, tc.reason, f, got, tc.want)
			}
		}
	}
	// Equal logits: the least probable member of A is the one with the largest id.
	for _, f := range forms {
		p := must(processors.NewXTC(0.3, 1, 1))
		// p ≈ 0.333, 0.333, 0.333, 0.0008: A = {0, 1, 2}, 2 kept.
		if got := keptIDs(t, p, nil, []float32{1, 1, 1, -5}, f); !slices.Equal(got, []int{2, 3}) {
			t.Errorf("ties %s: kept %v, want [2 3]", f, got)
		}
	}
	// Probability 0 never acts.
	p := must(processors.NewXTC(0.1, 0, 1))
	if got := keptIDs(t, p, nil, row, dense); len(got) != 4 {
		t.Errorf("probability 0: kept %v", got)
	}
}

// xtcActs reports whether one Process of p for seq changed the set.
func xtcActs(t *testing.T, p core.LogitsProcessor, seq *core.Sequence) bool {
	t.Helper()
	row := lnProbs(0.4, 0.3, 0.2, 0.1)
	c := candidates(row, dense)
	if err := p.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	return c.Dense()[0] == ninf
}

// The coin of step t of sequence i is the t-th draw of core.DeriveStream(seed, i, "xtc").
func TestXTCCoinStream(t *testing.T) {
	seqs := sequences(t, 10, []core.TokenID{3, 4}, 9, 2)
	coins := func(index, n int) []bool {
		r := core.DeriveStream(9, index, "xtc")
		out := make([]bool, n)
		for i := range out {
			out[i] = r.Float64() < 0.5
		}
		return out
	}
	p := must(processors.NewXTC(0.25, 0.5, 1))
	var got []bool
	for range 40 {
		got = append(got, xtcActs(t, p, seqs[0]))
	}
	want := coins(0, 60)
	if !slices.Equal(got, want[:40]) {
		t.Fatalf("sequence 0 acted %v\nits coins say %v", got, want[:40])
	}
	// A clone continues the stream where the original stands: both make the same next 20
	// decisions (a speculative rollback replays the same coins).
	c := p.Clone()
	for i := range 20 {
		a, b := xtcActs(t, p, seqs[0]), xtcActs(t, c, seqs[0])
		if a != b || a != want[40+i] {
			t.Fatalf("step %d: original %v, clone %v, coin %v", 40+i, a, b, want[40+i])
		}
	}
	// A clone that runs for another sequence (a fork) draws that sequence's stream from its
	// start, independent of sequence 0's.
	f := p.Clone()
	var forked []bool
	for range 40 {
		forked = append(forked, xtcActs(t, f, seqs[1]))
	}
	if want1 := coins(1, 40); !slices.Equal(forked, want1) {
		t.Fatalf("sequence 1 acted %v\nits coins say %v", forked, want1)
	}
	if slices.Equal(forked, want[:40]) {
		t.Fatal("sequences 0 and 1 drew the same coins")
	}
}

func ExampleXTC() {
	// Probabilities 0.4, 0.3, 0.2, 0.1 and threshold 0.15: 0.4, 0.3 and 0.2 reach it, so the
	// two most likely are removed and 0.2 stays (probability 1: XTC acts at every step).
	p, _ := processors.NewXTC(0.15, 1, 1)
	c := core.NewCandidates(lnProbs(0.4, 0.3, 0.2, 0.1))
	_ = p.Process(nil, c)
	fmt.Printf("%.3f\n", c.Dense())
	// Output: [-Inf -Inf -1.609 -2.303]
}
