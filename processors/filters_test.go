package processors_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

func TestConstructionErrors(t *testing.T) {
	nanF, infF := math.NaN(), math.Inf(1)
	cases := []struct {
		name  string
		build func() error
		param string
	}{
		{"temperature negative", func() error { _, err := processors.NewTemperature(-0.1); return err }, "t"},
		{"temperature NaN", func() error { _, err := processors.NewTemperature(nanF); return err }, "t"},
		{"temperature +Inf", func() error { _, err := processors.NewTemperature(infF); return err }, "t"},
		{"temperature tiny", func() error { _, err := processors.NewTemperature(1e-40); return err }, "t"},
		{"top_k negative", func() error { _, err := processors.NewTopK(-1); return err }, "k"},
		{"top_p negative", func() error { _, err := processors.NewTopP(-0.1, 1); return err }, "p"},
		{"top_p above 1", func() error { _, err := processors.NewTopP(1.5, 1); return err }, "p"},
		{"top_p NaN", func() error { _, err := processors.NewTopP(nanF, 1); return err }, "p"},
		{"top_p min_keep", func() error { _, err := processors.NewTopP(0.9, 0); return err }, "min_keep"},
		{"min_p negative", func() error { _, err := processors.NewMinP(-0.1, 1); return err }, "p"},
		{"min_p above 1", func() error { _, err := processors.NewMinP(1.1, 1); return err }, "p"},
		{"min_p min_keep", func() error { _, err := processors.NewMinP(0.1, -3); return err }, "min_keep"},
		{"typical_p zero", func() error { _, err := processors.NewTypicalP(0, 1); return err }, "p"},
		{"typical_p min_keep", func() error { _, err := processors.NewTypicalP(0.5, 0); return err }, "min_keep"},
		{"repetition zero", func() error { _, err := processors.NewRepetitionPenalty(0, processors.Window{}); return err }, "penalty"},
		{"repetition Inf", func() error { _, err := processors.NewRepetitionPenalty(infF, processors.Window{}); return err }, "penalty"},
		{"frequency NaN", func() error { _, err := processors.NewFrequencyPenalty(nanF, processors.Window{}); return err }, "penalty"},
		{"presence Inf", func() error { _, err := processors.NewPresencePenalty(-infF, processors.Window{}); return err }, "penalty"},
		{"penalties repeat", func() error { _, err := processors.NewPenalties(-1, 0, 0, processors.Window{}); return err }, "repeat"},
		{"penalties frequency", func() error { _, err := processors.NewPenalties(1, nanF, 0, processors.Window{}); return err }, "frequency"},
		{"penalties presence", func() error { _, err := processors.NewPenalties(1, 0, infF, processors.Window{}); return err }, "presence"},
		{"penalties last_n", func() error { _, err := processors.NewPenalties(1, 0, 0, processors.Window{LastN: -2}); return err }, "last_n"},
		{"scope", func() error { _, err := processors.ParseScope("prompt"); return err }, "scope"},
		{"no_repeat_ngram", func() error { _, err := processors.NewNoRepeatNGram(0); return err }, "n"},
		{"min_new_tokens", func() error { _, err := processors.NewMinNewTokens(-1, nil, 0); return err }, "n"},
		{"logit_bias id", func() error {
			_, err := processors.NewLogitBias(map[core.TokenID]float64{3: 1, 200000: -1}, 100)
			return err
		}, "bias.200000"},
		{"logit_bias negative id", func() error { _, err := processors.NewLogitBias(map[core.TokenID]float64{-1: 1}, 100); return err }, "bias.-1"},
		{"logit_bias +Inf", func() error { _, err := processors.NewLogitBias(map[core.TokenID]float64{3: infF}, 100); return err }, "bias.3"},
		{"bad_words empty", func() error { _, err := processors.NewBadWords([][]core.TokenID{{1}, {}}, 100, nil); return err }, "ids[1]"},
		{"bad_words id", func() error { _, err := processors.NewBadWords([][]core.TokenID{{1, 100}}, 100, nil); return err }, "ids[0][1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantParamError(t, c.build(), c.param) })
	}
	_, err := processors.NewLogitBias(map[core.TokenID]float64{200000: -1}, 100)
	if want := "bias.200000: token id 200000 is outside the vocabulary [0, 100)"; err == nil || err.Error() != want {
		t.Errorf("logit_bias error %q, want %q", err, want)
	}
	_, err = processors.NewTopP(1.5, 1)
	if want := "p = 1.5: must be in [0, 1] (1 disables, 0 keeps the most likely token)"; err == nil || err.Error() != want {
		t.Errorf("top_p error %q, want %q", err, want)
	}
}

// Filters must report what the set cannot be sampled from, in every form, and never panic.
func TestFiltersOnInvalidRows(t *testing.T) {
	topP, _ := processors.NewTopP(0.9, 1)
	minP, _ := processors.NewMinP(0.1, 1)
	typical, _ := processors.NewTypicalP(0.9, 1)
	greedy, _ := processors.NewTemperature(0)
	topK, _ := processors.NewTopK(2)
	rows := []struct {
		name string
		row  []float32
		want error
	}{
		{"NaN", []float32{1, 2, nan, 0, 3}, core.ErrInvalidLogits},
		{"+Inf", []float32{1, inf, 2, 0, 3}, core.ErrInvalidLogits},
		{"all banned", []float32{ninf, ninf, ninf, ninf, ninf}, core.ErrNoCandidates},
	}
	for _, p := range []core.LogitsProcessor{topP, minP, typical, greedy, topK} {
		for _, r := range rows {
			for _, f := range forms {
				if p == topK && r.name == "+Inf" {
					continue // top-k keeps +Inf; the selection reports it
				}
				if f == sparseSorted && r.name == "NaN" {
					continue // sorting a NaN row gives no meaningful order
				}
				c := candidates(r.row, f)
				err := p.Process(nil, c)
				if !errors.Is(err, r.want) {
					t.Errorf("%s on %s row (%s): err = %v, want %v", p.Name(), r.name, f, err, r.want)
				}
			}
		}
		// An empty sparse set.
		c := core.NewCandidates(nil)
		c.SetItems(c.Buffer(0), false)
		if err := p.Process(nil, c); err == nil {
			if _, err := core.SampleFrom(c, 0.5); !errors.Is(err, core.ErrNoCandidates) {
				t.Errorf("%s on an empty set: then sampling gives %v", p.Name(), err)
			}
		}
	}
	// Penalties and bans pass NaN and ±Inf through.
	seq := newSeq(t, 10, []core.TokenID{1, 2, 3, 3})
	pen, _ := processors.NewPenalties(1.3, 0.5, 0.5, processors.Window{LastN: processors.WholeHistory})
	row := []float32{0, 1, nan, inf, ninf, 5, 6, 7, 8, 9}
	c := candidates(row, dense)
	if err := pen.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	got := c.Dense()
	if got[2] == got[2] || got[3] != inf || got[4] != ninf {
		t.Fatalf("penalties changed NaN/Inf logits: %v", got)
	}
}

func TestTemperature(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	row := randomRow(r, 50, 3)
	row[7] = ninf
	for _, temp := range []float64{0.25, 0.8, 1, 1.7} {
		p, err := processors.NewTemperature(temp)
		if err != nil {
			t.Fatal(err)
		}
		want := refTemperature(toF64(row), temp)
		for _, f := range forms {
			c := candidates(row, f)
			if err := p.Process(nil, c); err != nil {
				t.Fatal(err)
			}
			checkSorted(t, c)
			if f == sparseSorted && !c.Sorted() {
				t.Errorf("t=%v: a sorted set must stay sorted", temp)
			}
			got := logitsByID(c, len(row))
			for i := range got {
				if math.Abs(float64(got[i])-want[i]) > 1e-6*math.Abs(want[i]) && !(math.IsInf(want[i], -1) && got[i] == ninf) {
					t.Fatalf("t=%v %s: logit %d = %v, want %v", temp, f, i, got[i], want[i])
				}
			}
		}
	}
	// t = 0 keeps the argmax only, ties to the lowest id.
	greedy, _ := processors.NewTemperature(0)
	tied := []float32{1, 4, 2, 4, 4}
	for _, f := range forms {
		c := candidates(tied, f)
		if err := greedy.Process(nil, c); err != nil {
			t.Fatal(err)
		}
		if got := kept(c, len(tied)); !slices.Equal(got, []int{1}) {
			t.Errorf("t=0 %s: kept %v, want [1]", f, got)
		}
		ch, err := core.SampleFrom(c, 0.999)
		if err != nil || ch.ID != 1 || ch.Logprob != 0 {
			t.Errorf("t=0 %s: sampled %+v, %v", f, ch, err)
		}
	}
}

func TestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{10, 100, 3000} {
		row := randomRow(r, n, 2)
		for i := 0; i < n; i += 7 {
			row[i] = row[i/2] // ties
		}
		for _, k := range []int{0, 1, 5, 40, n - 1, n, n + 10} {
			p, err := processors.NewTopK(k)
			if err != nil {
				t.Fatal(err)
			}
			want := refTopK(toF64(row), k)
			for _, f := range forms {
				c := candidates(row, f)
				if err := p.Process(nil, c); err != nil {
					t.Fatal(err)
				}
				checkSorted(t, c)
				got := logitsByID(c, n)
				for i := range got {
					if float64(got[i]) != want[i] {
						t.Fatalf("n=%d k=%d %s: token %d has %v, want %v", n, k, f, i, got[i], want[i])
					}
				}
				if k > 0 && k < n && (!c.Sorted() || c.Len() != k) {
					t.Fatalf("n=%d k=%d %s: result has %d items, sorted %v", n, k, f, c.Len(), c.Sorted())
				}
			}
		}
	}
}

// checkMassFilter compares a top-p or typical-p processor with its float64 reference on many
// random rows, in every form; the cases that float32 rounding could decide either way (the
// cumulative probability within 1e-5 of p at the cut) are skipped.
func checkMassFilter(t *testing.T, name string, build func(p float64, minKeep int) (core.LogitsProcessor, error),
	ref func(x []float64, p float64, minKeep int) ([]float64, float64)) {
	r := rand.New(rand.NewPCG(5, 6))
	checked := 0
	for _, n := range []int{1, 2, 10, 100, 129, 1000, 4000} {
		for trial := range 6 {
			sigma := []float64{0.3, 1, 2.5, 4, 8, 2}[trial]
			row := randomRow(r, n, sigma)
			if trial == 5 {
				for i := range row {
					row[i] = float32(r.IntN(4)) // heavy ties
				}
				if n > 2 {
					row[1] = ninf
				}
			}
			for _, pv := range []float64{0.05, 0.5, 0.9, 0.95, 0.999} {
				for _, minKeep := range []int{1, 3, 150} {
					want, margin := ref(toF64(row), pv, minKeep)
					if margin < 1e-5 {
						continue
					}
					p, err := build(pv, minKeep)
					if err != nil {
						t.Fatal(err)
					}
					for _, f := range forms {
						c := candidates(row, f)
						if err := p.Process(nil, c); err != nil {
							t.Fatalf("%s n=%d p=%v: %v", name, n, pv, err)
						}
						checkSorted(t, c)
						got := logitsByID(c, n)
						for i := range got {
							if math.IsInf(want[i], -1) != (got[i] == ninf) {
								t.Fatalf("%s n=%d σ=%v p=%v min_keep=%d %s: token %d kept=%v, want %v (kept %d)",
									name, n, sigma, pv, minKeep, f, i, got[i] > ninf, want[i] > math.Inf(-1), finiteCount(want))
							}
						}
						checked++
					}
				}
			}
		}
	}
	if checked < 500 {
		t.Fatalf("only %d cases checked", checked)
	}
}

func TestTopPMatchesDefinition(t *testing.T) {
	checkMassFilter(t, "top_p", func(p float64, k int) (core.LogitsProcessor, error) { return processors.NewTopP(p, k) }, refTopP)
}

func TestTypicalPMatchesDefinition(t *testing.T) {
	checkMassFilter(t, "typical_p", func(p float64, k int) (core.LogitsProcessor, error) { return processors.NewTypicalP(p, k) }, refTypical)
}

// The histogram path on a full-size vocabulary.
func TestTopPLargeVocabulary(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sigma := range []float64{0.5, 3} {
		row := randomRow(r, 151936, sigma)
		for _, pv := range []float64{0.5, 0.95} {
			want, margin := refTopP(toF64(row), pv, 1)
			if margin < 1e-6 {
				continue
			}
			p, _ := processors.NewTopP(pv, 1)
			c := candidates(row, dense)
			if err := p.Process(nil, c); err != nil {
				t.Fatal(err)
			}
			if got, w := c.Len(), finiteCount(want); got != w {
				t.Fatalf("σ=%v p=%v: kept %d, want %d", sigma, pv, got, w)
			}
			for _, it := range c.Items() {
				if math.IsInf(want[it.ID], -1) {
					t.Fatalf("σ=%v p=%v: token %d kept, outside the nucleus", sigma, pv, it.ID)
				}
			}
		}
	}
}

func TestTopPEdgeCases(t *testing.T) {
	row := []float32{3, 1, 2, 0}
	// p = 1 disables.
	p, _ := processors.NewTopP(1, 1)
	c := candidates(row, dense)
	if err := p.Process(nil, c); err != nil || !c.IsDense() {
		t.Fatalf("p = 1 changed the set: %v", err)
	}
	// The crossing token is kept: probabilities ∝ e^3, e^2, e^1, e^0 ≈ .644, .237, .087, .032.
	for _, tc := range []struct {
		p    float64
		want []int
	}{{0.5, []int{0}}, {0.643, []int{0}}, {0.7, []int{0, 2}}, {0.9, []int{0, 1, 2}}, {0.99, []int{0, 1, 2, 3}}} {
		p, _ := processors.NewTopP(tc.p, 1)
		for _, f := range forms {
			c := candidates(row, f)
			if err := p.Process(nil, c); err != nil {
				t.Fatal(err)
			}
			if got := kept(c, 4); !slices.Equal(got, tc.want) {
				t.Errorf("p=%v %s: kept %v, want %v", tc.p, f, got, tc.want)
			}
		}
	}
	// min_keep above the set size keeps everything.
	p, _ = processors.NewTopP(0.1, 10)
	for _, f := range forms {
		c := candidates(row, f)
		if err := p.Process(nil, c); err != nil || len(kept(c, 4)) != 4 {
			t.Errorf("min_keep > size %s: kept %v, %v", f, kept(c, 4), err)
		}
	}
}

func TestMinP(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 10, 200, 5000} {
		for trial := range 3 {
			row := randomRow(r, n, []float64{0.5, 2, 5}[trial])
			for _, pv := range []float64{0, 0.01, 0.05, 0.3, 1} {
				for _, minKeep := range []int{1, 4} {
					want := refMinP(toF64(row), pv, minKeep)
					p, err := processors.NewMinP(pv, minKeep)
					if err != nil {
						t.Fatal(err)
					}
					for _, f := range forms {
						c := candidates(row, f)
						if err := p.Process(nil, c); err != nil {
							t.Fatal(err)
						}
						checkSorted(t, c)
						got := logitsByID(c, n)
						for i := range got {
							// Exactly at the threshold float32 and float64 may disagree.
							if math.IsInf(want[i], -1) != (got[i] == ninf) && !nearMinPThreshold(row, i, pv) {
								t.Fatalf("n=%d p=%v min_keep=%d %s: token %d kept=%v", n, pv, minKeep, f, i, got[i] > ninf)
							}
						}
					}
				}
			}
		}
	}
}

func nearMinPThreshold(row []float32, i int, p float64) bool {
	m := float64(slices.Max(row))
	return math.Abs(float64(row[i])-(m+math.Log(p))) < 1e-5
}

func TestFilterOrderOnSortedSetsIsKept(t *testing.T) {
	// top-k → top-p → min-p keeps a sorted prefix all the way, so sampling walks it in order.
	r := rand.New(rand.NewPCG(11, 12))
	row := randomRow(r, 1000, 2)
	tk, _ := processors.NewTopK(40)
	tp, _ := processors.NewTopP(0.95, 1)
	mp, _ := processors.NewMinP(0.05, 1)
	c := candidates(row, dense)
	for _, p := range []core.LogitsProcessor{tk, tp, mp} {
		if err := p.Process(nil, c); err != nil {
			t.Fatal(err)
		}
		if !c.Sorted() {
			t.Fatalf("after %s the set is not sorted", p.Name())
		}
	}
	checkSorted(t, c)
}

func ExampleTemperature() {
	p, _ := processors.NewTemperature(0.5)
	c := core.NewCandidates([]float32{1, 2, -3})
	_ = p.Process(nil, c)
	fmt.Println(c.Dense())
	// Output: [2 4 -6]
}

func ExampleTopK() {
	p, _ := processors.NewTopK(2)
	c := core.NewCandidates([]float32{0.5, 3, 1, 2})
	_ = p.Process(nil, c)
	fmt.Println(c.Items(), c.Sorted())
	// Output: [{1 3} {3 2}] true
}

func ExampleTopP() {
	// Probabilities ∝ e^3, e^2, e^1, e^0 ≈ 0.64, 0.24, 0.09, 0.03: the two most likely
	// tokens hold 0.88, so the nucleus of mass 0.9 also takes the third, which crosses 0.9.
	p, _ := processors.NewTopP(0.9, 1)
	c := core.NewCandidates([]float32{3, 1, 2, 0})
	_ = p.Process(nil, c)
	for _, it := range c.Items() {
		fmt.Print(it.ID, " ")
	}
	fmt.Println()
	// Output: 0 2 1
}

func ExampleMinP() {
	// p = 0.1 keeps tokens at least a tenth as likely as the best: logit ≥ 3 + ln 0.1 ≈ 0.7.
	p, _ := processors.NewMinP(0.1, 1)
	c := core.NewCandidates([]float32{3, 0.5, 2, 1})
	_ = p.Process(nil, c)
	fmt.Println(c.Items())
	// Output: [{0 3} {2 2} {3 1}]
}

func ExampleTypicalP() {
	// p ≈ 0.24, 0.66, 0.01, 0.09 and the entropy is 0.89 nats: token 1 (−log p ≈ 0.42) is the
	// closest to it and alone holds more than half the mass.
	p, _ := processors.NewTypicalP(0.5, 1)
	c := core.NewCandidates([]float32{1, 2, -2, 0})
	_ = p.Process(nil, c)
	for _, it := range c.Items() {
		fmt.Print(it.ID, " ")
	}
	fmt.Println()
	// Output: 1
}
