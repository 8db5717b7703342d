package processors_test

import (
	"math/rand/v2"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// Once warmed up, no processor allocates per token, on a dense row or on the sparse set a
// truncating processor leaves behind, and neither does sampling.
func TestNoAllocationsPerToken(t *testing.T) {
	const vocab = 5000
	r := rand.New(rand.NewPCG(61, 62))
	src := randomRow(r, vocab, 2.5)
	prompt := make([]core.TokenID, 300)
	for i := range prompt {
		prompt[i] = core.TokenID(3 + r.IntN(40))
	}
	seq := newSeq(t, vocab, prompt)
	bias := map[core.TokenID]float64{}
	for i := range 50 {
		bias[core.TokenID(i*97)] = float64(i%5) - 2
	}
	procs := []core.LogitsProcessor{
		must(processors.NewTemperature(0.7)),
		must(processors.NewTemperature(0)),
		must(processors.NewTopK(40)),
		must(processors.NewTopP(0.9, 1)),
		must(processors.NewMinP(0.05, 1)),
		must(processors.NewTypicalP(0.9, 1)),
		must(processors.NewPenalties(1.1, 0.1, 0.1, processors.Window{LastN: 64})),
		must(processors.NewFrequencyPenalty(0.2, processors.Window{LastN: processors.WholeHistory})),
		must(processors.NewNoRepeatNGram(1)),
		must(processors.NewLogitBias(bias, vocab)),
		must(processors.NewMinNewTokens(10, []core.TokenID{2}, vocab)),
		must(processors.NewBadWords([][]core.TokenID{{5}, {prompt[len(prompt)-1], 9}}, vocab, nil)),
	}
	row := make([]float32, vocab)
	c := core.NewCandidates(row)
	rng := core.NewRand(1, 0)
	// What comes before: nothing (a dense row), a filter leaving thousands of tokens unsorted,
	// one leaving a few dozen unsorted, one leaving 100 sorted.
	before := []core.LogitsProcessor{
		core.Chain{},
		must(processors.NewMinP(1e-4, 1)),
		must(processors.NewMinP(0.05, 1)),
		must(processors.NewTopK(100)),
	}
	for _, p := range procs {
		for _, first := range before {
			step := func() {
				copy(row, src)
				c.Reset(row)
				if err := first.Process(seq, c); err != nil {
					t.Fatal(err)
				}
				if err := p.Process(seq, c); err != nil {
					t.Fatal(err)
				}
				if _, err := core.SampleFrom(c, rng.Float64()); err != nil {
					t.Fatal(err)
				}
			}
			step()
			if allocs := testing.AllocsPerRun(20, step); allocs != 0 {
				t.Errorf("%s after %s: %v allocations per token", p.Name(), first.Name(), allocs)
			}
		}
	}
}

// Processors without state are shared by every sequence of every request: used from many
// goroutines at once, each with its own candidate set, they must not interfere (run with
// -race) and must give each the same result as alone.
func TestConcurrentUse(t *testing.T) {
	const vocab = 3000
	src := randomRow(rand.New(rand.NewPCG(63, 64)), vocab, 2)
	chain := core.Chain{
		must(processors.NewTemperature(0.8)),
		must(processors.NewTopP(0.9, 1)),
		must(processors.NewTypicalP(0.95, 1)),
		must(processors.NewMinP(0.01, 1)),
		must(processors.NewNoRepeatNGram(2)),
	}
	seq := newSeq(t, vocab, []core.TokenID{4, 5, 4})
	run := func() []int {
		row := append([]float32(nil), src...)
		c := core.NewCandidates(row)
		if err := chain.Process(seq, c); err != nil {
			t.Error(err)
			return nil
		}
		return kept(c, vocab)
	}
	want := run()
	done := make(chan []int)
	for range 4 {
		go func() {
			var got []int
			for range 30 {
				got = run()
			}
			done <- got
		}()
	}
	for range 4 {
		if got := <-done; len(got) != len(want) {
			t.Fatalf("concurrent run kept %d tokens, alone %d", len(got), len(want))
		}
	}
}
