package processors_test

import (
	"math/rand/v2"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/testmodel"
)

// Once warmed up, the new samplers allocate nothing per token either, stateful ones included
// (their Accept too), on a dense row and on the sparse sets truncating processors leave.
func TestNewSamplersAllocateNothingPerToken(t *testing.T) {
	const vocab = 5000
	src := randomRow(rand.New(rand.NewPCG(65, 66)), vocab, 2.5)
	seq := repetitiveSequence(t, vocab, 1500)
	_, tok := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: vocab})
	procs := []core.LogitsProcessor{
		must(processors.NewTopNSigma(1.5)),
		must(processors.NewEpsilonCutoff(3e-4, 1)),
		must(processors.NewEpsilonCutoff(3e-4, 20)),
		must(processors.NewEtaCutoff(3e-4, 3)),
		must(processors.NewDynamicTemperature(0.8, 0.5, 1)),
		must(processors.NewDynamicTemperature(0.1, 0.5, 1)),
		must(processors.NewXTC(0.01, 1, 1)),
		must(processors.NewXTC(0.01, 0.5, 3)),
		must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 5, Eta: 0.1})),
		must(processors.NewMirostat(processors.MirostatConfig{Version: 1, Tau: 5, Eta: 0.1, M: 100, VocabSize: vocab})),
		must(processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, AllowedLength: 2, LastN: 1024,
			SequenceBreakers: processors.DefaultSequenceBreakers}, tok)),
		must(processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, AllowedLength: 1, LastN: -1}, nil)),
		must(processors.NewTopPBoundary(0.9, 1, processors.Exclusive)),
	}
	before := []core.LogitsProcessor{
		core.Chain{},
		must(processors.NewMinP(1e-4, 1)),
		must(processors.NewMinP(0.05, 1)),
		must(processors.NewTopK(100)),
	}
	row := make([]float32, vocab)
	c := core.NewCandidates(row)
	rng := core.NewRand(1, 0)
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
				ch, err := core.SampleFrom(c, rng.Float64())
				if err != nil {
					t.Fatal(err)
				}
				if sp, ok := p.(core.StatefulProcessor); ok {
					sp.Accept(seq, ch.ID)
				}
			}
			step()
			if allocs := testing.AllocsPerRun(20, step); allocs != 0 {
				t.Errorf("%s after %s: %v allocations per token", p.Name(), first.Name(), allocs)
			}
		}
	}
}

// The new processors without state are shared by every sequence: used from several goroutines
// at once, each with its own candidate set, they must not interfere (run with -race).
func TestNewStatelessSamplersConcurrentUse(t *testing.T) {
	const vocab = 3000
	src := randomRow(rand.New(rand.NewPCG(67, 68)), vocab, 2)
	chain := core.Chain{
		must(processors.NewDynamicTemperature(0.9, 0.4, 1)),
		must(processors.NewEtaCutoff(3e-4, 2)),
		must(processors.NewEpsilonCutoff(1e-4, 2)),
		must(processors.NewTopNSigma(2)),
	}
	run := func() []int {
		c := core.NewCandidates(append([]float32(nil), src...))
		if err := chain.Process(nil, c); err != nil {
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
