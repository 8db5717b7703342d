package processors_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/stattest"
	"github.com/loomlm/loom/processors"
)

// refStep is one processor's formula in float64; it returns the new logits and the smallest
// distance between a cumulative probability and p at its cut (+Inf when it has no cut).
type refStep func(x []float64) ([]float64, float64)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func exact(f func(x []float64) []float64) refStep {
	return func(x []float64) ([]float64, float64) { return f(x), math.Inf(1) }
}

func temperatureStep(t float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewTemperature(t)), exact(func(x []float64) []float64 { return refTemperature(x, t) })
}

func topKStep(k int) (core.LogitsProcessor, refStep) {
	return must(processors.NewTopK(k)), exact(func(x []float64) []float64 { return refTopK(x, k) })
}

func topPStep(p float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewTopP(p, 1)), func(x []float64) ([]float64, float64) { return refTopP(x, p, 1) }
}

func minPStep(p float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewMinP(p, 1)), exact(func(x []float64) []float64 { return refMinP(x, p, 1) })
}

func typicalStep(p float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewTypicalP(p, 1)), func(x []float64) ([]float64, float64) { return refTypical(x, p, 1) }
}

func penaltiesStep(seq *core.Sequence, repeat, freq, presence float64, lastN int) (core.LogitsProcessor, refStep) {
	p := must(processors.NewPenalties(repeat, freq, presence, processors.Window{Scope: processors.ScopeAll, LastN: lastN}))
	return p, exact(func(x []float64) []float64 {
		return refPenalties(x, seq.Tokens(), seq.PromptLen(), repeat, freq, presence, false, lastN)
	})
}

func chainOf(steps ...func() (core.LogitsProcessor, refStep)) ([]core.LogitsProcessor, []refStep) {
	var ps []core.LogitsProcessor
	var rs []refStep
	for _, s := range steps {
		p, r := s()
		ps, rs = append(ps, p), append(rs, r)
	}
	return ps, rs
}

func step[A any](f func(A) (core.LogitsProcessor, refStep), a A) func() (core.LogitsProcessor, refStep) {
	return func() (core.LogitsProcessor, refStep) { return f(a) }
}

// expected runs the reference chain and returns the final distribution.
func expected(t *testing.T, row []float32, ref []refStep) []float64 {
	t.Helper()
	x := toF64(row)
	for i, r := range ref {
		var margin float64
		x, margin = r(x)
		if margin < 1e-6 {
			t.Fatalf("step %d: a cumulative probability lies within %.2g of p: rounding could decide the cut; change the test row", i, margin)
		}
	}
	return softmax(x)
}

// draw samples n tokens from the chain applied to a fresh copy of row each time, as a
// strategy does, with the sampling stream of sequence 0 of seed.
func draw(t *testing.T, seq *core.Sequence, row []float32, chain core.Chain, n int, seed uint64) []int {
	t.Helper()
	buf := make([]float32, len(row))
	c := core.NewCandidates(buf)
	rng := core.NewRand(seed, 0)
	counts := make([]int, len(row))
	for range n {
		copy(buf, row)
		c.Reset(buf)
		if err := chain.Process(seq, c); err != nil {
			t.Fatal(err)
		}
		ch, err := core.SampleFrom(c, rng.Float64())
		if err != nil {
			t.Fatal(err)
		}
		counts[ch.ID]++
	}
	return counts
}

// TestSamplingMatchesTheFormulas draws 30 000 tokens through each processor combination and
// checks the counts against the exact distribution computed from the formulas in float64:
// Pearson's chi-square p-value must exceed 1e-3 (fixed seeds, so the test is deterministic),
// and no token outside the kept set may ever be drawn.
func TestSamplingMatchesTheFormulas(t *testing.T) {
	const vocab, draws = 60, 30000
	row := randomRow(rand.New(rand.NewPCG(31, 32)), vocab, 1.6)
	prompt := []core.TokenID{10, 11, 12, 10, 13}
	generated := []core.TokenID{14, 10, 15, 14, 16, 17, 10, 18, 19, 11}
	seq := newSeq(t, vocab, prompt, generated...)
	pen := func(lastN int) func() (core.LogitsProcessor, refStep) {
		return func() (core.LogitsProcessor, refStep) { return penaltiesStep(seq, 1.3, 0.2, 0.3, lastN) }
	}
	cases := []struct {
		name  string
		steps []func() (core.LogitsProcessor, refStep)
	}{
		{"temperature 1", []func() (core.LogitsProcessor, refStep){step(temperatureStep, 1.0)}},
		{"temperature 0.7", []func() (core.LogitsProcessor, refStep){step(temperatureStep, 0.7)}},
		{"temperature 1.5", []func() (core.LogitsProcessor, refStep){step(temperatureStep, 1.5)}},
		{"temperature 0", []func() (core.LogitsProcessor, refStep){step(temperatureStep, 0.0)}},
		{"top_k 10", []func() (core.LogitsProcessor, refStep){step(topKStep, 10)}},
		{"top_p 0.8", []func() (core.LogitsProcessor, refStep){step(topPStep, 0.8)}},
		{"min_p 0.1", []func() (core.LogitsProcessor, refStep){step(minPStep, 0.1)}},
		{"typical_p 0.7", []func() (core.LogitsProcessor, refStep){step(typicalStep, 0.7)}},
		{"penalties", []func() (core.LogitsProcessor, refStep){pen(0)}},
		{"penalties last 8", []func() (core.LogitsProcessor, refStep){pen(8)}},
		{"temperature→top_k→top_p→min_p", []func() (core.LogitsProcessor, refStep){
			step(temperatureStep, 0.8), step(topKStep, 20), step(topPStep, 0.9), step(minPStep, 0.05)}},
		{"penalties→temperature→top_k→top_p→min_p", []func() (core.LogitsProcessor, refStep){
			pen(64), step(temperatureStep, 0.8), step(topKStep, 40), step(topPStep, 0.95), step(minPStep, 0.05)}},
		{"penalties→top_k→top_p→min_p→temperature", []func() (core.LogitsProcessor, refStep){
			pen(64), step(topKStep, 40), step(topPStep, 0.95), step(minPStep, 0.05), step(temperatureStep, 0.8)}},
		{"min_p→top_p→typical_p", []func() (core.LogitsProcessor, refStep){
			step(minPStep, 0.02), step(topPStep, 0.97), step(typicalStep, 0.9)}},
		{"temperature 2→top_p 0.6", []func() (core.LogitsProcessor, refStep){step(temperatureStep, 2.0), step(topPStep, 0.6)}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chain, ref := chainOf(tc.steps...)
			want := expected(t, row, ref)
			counts := draw(t, seq, row, chain, draws, uint64(100+i))
			res, err := stattest.ChiSquare(counts, want)
			if err != nil {
				t.Fatal(err)
			}
			if res.Impossible >= 0 {
				t.Fatalf("drew token %d, which the chain removes", res.Impossible)
			}
			if res.PValue <= 1e-3 {
				t.Fatalf("counts do not follow the formula: %v; total variation %.4f", res, stattest.TotalVariation(counts, want))
			}
			t.Logf("%v, kept %d tokens, total variation %.4f", res, nonzero(want), stattest.TotalVariation(counts, want))
		})
	}
}

func nonzero(p []float64) int {
	n := 0
	for _, v := range p {
		if v > 0 {
			n++
		}
	}
	return n
}

// The same check on a larger vocabulary, where top-p and typical-p take the histogram path on
// a dense row and keep hundreds of tokens (small expected counts are pooled).
func TestSamplingLargeVocabulary(t *testing.T) {
	const vocab, draws = 1000, 25000
	row := randomRow(rand.New(rand.NewPCG(41, 42)), vocab, 1.2)
	seq := newSeq(t, vocab, []core.TokenID{5})
	for i, steps := range [][]func() (core.LogitsProcessor, refStep){
		{step(topPStep, 0.9)},
		{step(typicalStep, 0.8)},
		{step(temperatureStep, 0.6), step(minPStep, 0.02)},
	} {
		chain, ref := chainOf(steps...)
		want := expected(t, row, ref)
		counts := draw(t, seq, row, chain, draws, uint64(200+i))
		res, err := stattest.ChiSquare(counts, want)
		if err != nil {
			t.Fatal(err)
		}
		if res.Impossible >= 0 || res.PValue <= 1e-3 {
			t.Fatalf("%s: %v", chain[len(chain)-1].Name(), res)
		}
		t.Logf("%s: %v, kept %d", chain[len(chain)-1].Name(), res, nonzero(want))
	}
}

// Order matters and is the chain's: temperature before top-p changes which tokens top-p keeps.
func TestTemperatureBeforeTopPChangesTheNucleus(t *testing.T) {
	row := []float32{4, 3, 2.5, 2, 1, 0.5, 0, -1}
	keptBy := func(chain core.Chain) []int {
		c := candidates(row, dense)
		if err := chain.Process(nil, c); err != nil {
			t.Fatal(err)
		}
		return kept(c, len(row))
	}
	hot, _ := processors.NewTemperature(2)
	cold, _ := processors.NewTemperature(0.5)
	topP, _ := processors.NewTopP(0.8, 1)

	plain := keptBy(core.Chain{topP})
	hotFirst := keptBy(core.Chain{hot, topP})
	hotLast := keptBy(core.Chain{topP, hot})
	coldFirst := keptBy(core.Chain{cold, topP})
	if !slices.Equal(hotLast, plain) {
		t.Fatalf("temperature after top-p must not change the kept set: %v vs %v", hotLast, plain)
	}
	if len(hotFirst) <= len(plain) || len(coldFirst) >= len(plain) {
		t.Fatalf("temperature before top-p: hot keeps %v, cold keeps %v, top-p alone %v", hotFirst, coldFirst, plain)
	}
	for _, tc := range []struct {
		got  []int
		temp float64
	}{{hotFirst, 2}, {coldFirst, 0.5}} {
		want, _ := refTopP(refTemperature(toF64(row), tc.temp), 0.8, 1)
		var wantIDs []int
		for id, v := range want {
			if v > math.Inf(-1) {
				wantIDs = append(wantIDs, id)
			}
		}
		if !slices.Equal(tc.got, wantIDs) {
			t.Fatalf("t=%v then top-p: kept %v, want %v", tc.temp, tc.got, wantIDs)
		}
	}
}

// Sampling is reproducible: the same seed draws the same tokens, another seed others.
func TestSeededDrawsRepeat(t *testing.T) {
	row := randomRow(rand.New(rand.NewPCG(51, 52)), 500, 2)
	chain, _ := chainOf(step(temperatureStep, 0.9), step(topPStep, 0.95))
	a := draw(t, nil, row, chain, 2000, 7)
	b := draw(t, nil, row, chain, 2000, 7)
	c := draw(t, nil, row, chain, 2000, 8)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatal("the same seed must give the same draws and another seed different ones")
	}
}

// A negative control: the same test rejects draws compared with a slightly wrong formula, so
// passing it means something.
func TestSamplingTestHasPower(t *testing.T) {
	row := randomRow(rand.New(rand.NewPCG(31, 32)), 60, 1.6)
	chain, _ := chainOf(step(temperatureStep, 0.7), step(topPStep, 0.9))
	_, wrongRef := chainOf(step(temperatureStep, 0.75), step(topPStep, 0.9))
	counts := draw(t, nil, row, chain, 30000, 100)
	res, err := stattest.ChiSquare(counts, expected(t, row, wrongRef))
	if err != nil {
		t.Fatal(err)
	}
	if res.Impossible < 0 && res.PValue > 1e-6 {
		t.Fatalf("t = 0.7 draws pass as t = 0.75: %v", res)
	}
}
