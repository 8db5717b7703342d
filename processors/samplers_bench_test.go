package processors_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/testmodel"
)

// Benchmarks of the samplers beyond the core set, in the same setting as bench_test.go: one
// processor (or chain) per op on a fresh copy of a random row (σ = 2.5) at 32 000 and 151 936
// tokens, the copy included (BenchmarkFreshRow measures it alone).

// repetitiveSequence returns a sequence of n prompt tokens made of phrases drawn from a small
// pool, so that DRY finds repeats everywhere, as in real text that loops.
func repetitiveSequence(b testing.TB, vocab, n int) *core.Sequence {
	r := rand.New(rand.NewPCG(uint64(vocab), 3))
	var phrases [][]core.TokenID
	for range 40 {
		ph := make([]core.TokenID, 3+r.IntN(12))
		for i := range ph {
			ph[i] = core.TokenID(3 + r.IntN(vocab-3))
		}
		phrases = append(phrases, ph)
	}
	toks := make([]core.TokenID, 0, n+16)
	for len(toks) < n {
		toks = append(toks, phrases[r.IntN(len(phrases))]...)
	}
	return newSeq(b, vocab, toks[:n])
}

func benchOn(b *testing.B, seqLen int, build func(vocab int) core.LogitsProcessor, sample bool) {
	for _, vocab := range benchVocabs {
		b.Run(fmt.Sprintf("vocab=%d", vocab), func(b *testing.B) {
			e := newBenchEnv(b, vocab)
			if seqLen > 0 {
				e.seq = repetitiveSequence(b, vocab, seqLen)
			}
			p := build(vocab)
			step := func() {
				c := e.fresh()
				if err := p.Process(e.seq, c); err != nil {
					b.Fatal(err)
				}
				if sample {
					if _, err := core.SampleFrom(c, e.rng.Float64()); err != nil {
						b.Fatal(err)
					}
				}
			}
			step()
			b.ReportAllocs()
			for b.Loop() {
				step()
			}
		})
	}
}

func BenchmarkTopNSigma1(b *testing.B) {
	benchOn(b, 0, func(int) core.LogitsProcessor { return must(processors.NewTopNSigma(1)) }, false)
}

func BenchmarkEpsilonCutoff(b *testing.B) {
	benchOn(b, 0, func(int) core.LogitsProcessor { return must(processors.NewEpsilonCutoff(3e-4, 1)) }, false)
}

func BenchmarkEtaCutoff(b *testing.B) {
	benchOn(b, 0, func(int) core.LogitsProcessor { return must(processors.NewEtaCutoff(3e-4, 1)) }, false)
}

func BenchmarkDynamicTemperature(b *testing.B) {
	benchOn(b, 0, func(int) core.LogitsProcessor { return must(processors.NewDynamicTemperature(0.8, 0.5, 1)) }, false)
}

// BenchmarkXTC acts at every step (probability 1) on the full row.
func BenchmarkXTC(b *testing.B) {
	benchOn(b, 0, func(int) core.LogitsProcessor { return must(processors.NewXTC(0.1, 1, 1)) }, false)
}

// BenchmarkMirostatV2 is mirostat v2 (τ = 5, μ = 10) then sampling, μ held (no Accept).
func BenchmarkMirostatV2(b *testing.B) {
	benchOn(b, 0, func(int) core.LogitsProcessor {
		return must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 5, Eta: 0.1}))
	}, true)
}

// BenchmarkMirostatV1 is mirostat v1 (τ = 5, m = 100) then sampling.
func BenchmarkMirostatV1(b *testing.B) {
	benchOn(b, 0, func(vocab int) core.LogitsProcessor {
		return must(processors.NewMirostat(processors.MirostatConfig{Version: 1, Tau: 5, Eta: 0.1, M: 100, VocabSize: vocab}))
	}, true)
}

// benchDRY is DRY with the usual settings, a window of 1 024 tokens and the default sequence
// breakers over the test tokenizer of the vocabulary.
func benchDRY(vocab int) *processors.DRY {
	_, tok := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: vocab})
	return must(processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, AllowedLength: 2, LastN: 1024,
		SequenceBreakers: processors.DefaultSequenceBreakers}, tok))
}

// BenchmarkDRY is DRY over a window of 1 024 tokens of repetitive text.
func BenchmarkDRY(b *testing.B) {
	benchOn(b, 1200, func(vocab int) core.LogitsProcessor { return benchDRY(vocab) }, false)
}

// BenchmarkChainDRY is the common chain penalties(last 64) → top-k 40 → top-p 0.95 → min-p
// 0.05 → temperature 0.8 → sample, without and with DRY (window 1 024, after the penalties, as
// llama.cpp orders them), on a sequence of 1 200 tokens of repetitive text.
func BenchmarkChainDRY(b *testing.B) {
	for _, withDRY := range []bool{false, true} {
		name := "without-dry"
		if withDRY {
			name = "with-dry"
		}
		b.Run(name, func(b *testing.B) {
			benchOn(b, 1200, func(vocab int) core.LogitsProcessor {
				chain := core.Chain{must(processors.NewPenalties(1.1, 0.1, 0.1, processors.Window{LastN: 64}))}
				if withDRY {
					chain = append(chain, benchDRY(vocab))
				}
				return append(chain,
					must(processors.NewTopK(40)),
					must(processors.NewTopP(0.95, 1)),
					must(processors.NewMinP(0.05, 1)),
					must(processors.NewTemperature(0.8)))
			}, true)
		})
	}
}
