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
		must(processors.NewFrequencyPenalty(0.2, processors.Window{})),
		must(processors.NewNoRepeatNGram(1)),
		must(processors.NewLogitBias(bias, vocab)),
		must(processors.NewMinNewTokens(10, []core.TokenID{2})),
		must(processors.NewBadWords([][]core.TokenID{{5}, {prompt[len(prompt)-1], 9}}, vocab)),
	}
	row := make([]float32, vocab)
	c := core.NewCandidates(row)
	rng := core.NewRand(1, 0)
	wide := must(processors.NewMinP(1e-4, 1)) // leaves a sparse, unsorted set of many tokens
	for _, p := range procs {
		for _, sparse := range []bool{false, true} {
			step := func() {
				copy(row, src)
				c.Reset(row)
				if sparse {
					if err := wide.Process(seq, c); err != nil {
						t.Fatal(err)
					}
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
				t.Errorf("%s (sparse %v): %v allocations per token", p.Name(), sparse, allocs)
			}
		}
	}
}
