package processors_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// Benchmarks run each processor, or chain, once per op on random logits (normal, σ = 2.5) at
// the vocabulary sizes of Llama 2 (32 000) and Qwen2 (151 936). Every op starts from a fresh
// copy of the row, as the model hands over a new one each step, so ns/op is the cost per token
// including that copy (about 10 µs at 151 936; BenchmarkFreshRow measures it alone).

var benchVocabs = []int{32000, 151936}

type benchEnv struct {
	src, row []float32
	c        *core.Candidates
	seq      *core.Sequence
	rng      *rand.Rand
}

func newBenchEnv(b *testing.B, vocab int) *benchEnv {
	r := rand.New(rand.NewPCG(uint64(vocab), 1))
	src := randomRow(r, vocab, 2.5)
	prompt := make([]core.TokenID, 200)
	for i := range prompt {
		prompt[i] = core.TokenID(3 + r.IntN(vocab-3))
	}
	row := make([]float32, vocab)
	return &benchEnv{src: src, row: row, c: core.NewCandidates(row), seq: newSeq(b, vocab, prompt), rng: core.NewRand(1, 0)}
}

// fresh starts a step: a new row from the "model".
func (e *benchEnv) fresh() *core.Candidates {
	copy(e.row, e.src)
	e.c.Reset(e.row)
	return e.c
}

func benchEach(b *testing.B, build func(vocab int) core.LogitsProcessor, sample bool) {
	for _, vocab := range benchVocabs {
		b.Run(fmt.Sprintf("vocab=%d", vocab), func(b *testing.B) {
			e := newBenchEnv(b, vocab)
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
			step() // the first step sizes the buffers; steady state allocates nothing
			b.ReportAllocs()
			for b.Loop() {
				step()
			}
		})
	}
}

func BenchmarkFreshRow(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return core.Chain{} }, false)
}

func BenchmarkTemperature(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return must(processors.NewTemperature(0.8)) }, false)
}

func BenchmarkTemperatureZero(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return must(processors.NewTemperature(0)) }, false)
}

func BenchmarkTopK40(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return must(processors.NewTopK(40)) }, false)
}

func BenchmarkTopP095(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return must(processors.NewTopP(0.95, 1)) }, false)
}

func BenchmarkMinP005(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return must(processors.NewMinP(0.05, 1)) }, false)
}

func BenchmarkTypicalP095(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return must(processors.NewTypicalP(0.95, 1)) }, false)
}

func BenchmarkPenaltiesLast64(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor {
		return must(processors.NewPenalties(1.1, 0.1, 0.1, processors.Window{LastN: 64}))
	}, false)
}

func BenchmarkRepetitionPenaltyAll(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor {
		return must(processors.NewRepetitionPenalty(1.1, processors.Window{LastN: processors.WholeHistory}))
	}, false)
}

func BenchmarkNoRepeatNGram3(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return must(processors.NewNoRepeatNGram(3)) }, false)
}

func BenchmarkLogitBias100(b *testing.B) {
	benchEach(b, func(vocab int) core.LogitsProcessor {
		bias := map[core.TokenID]float64{}
		for i := range 100 {
			bias[core.TokenID(i*vocab/100)] = float64(i%7) - 3
		}
		return must(processors.NewLogitBias(bias, vocab))
	}, false)
}

func BenchmarkMinNewTokens(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return must(processors.NewMinNewTokens(1000, []core.TokenID{2, 5}, 0)) }, false)
}

func BenchmarkBadWords(b *testing.B) {
	benchEach(b, func(vocab int) core.LogitsProcessor {
		var seqs [][]core.TokenID
		for i := range 50 {
			seqs = append(seqs, []core.TokenID{core.TokenID(i + 3), core.TokenID(i + 4), core.TokenID(i + 5)})
		}
		return must(processors.NewBadWords(seqs, vocab, nil))
	}, false)
}

// BenchmarkTopPAloneThenSample is top-p 0.95 on the full vocabulary followed by sampling
// (llama.cpp: 2.2 ms at 32 000 and 11.7 ms at 151 936 on this kind of machine).
func BenchmarkTopPAloneThenSample(b *testing.B) {
	benchEach(b, func(int) core.LogitsProcessor { return must(processors.NewTopP(0.95, 1)) }, true)
}

// BenchmarkChain is the common chain penalties(last 64; repeat 1.1, frequency 0.1, presence
// 0.1) → temperature 0.8 → top-k 40 → top-p 0.95 → min-p 0.05 → sample, with temperature
// first (loom's recommended order) or last (llama.cpp's order; llama.cpp: 142 µs at 32 000
// and 592 µs at 151 936 on this kind of machine).
func BenchmarkChain(b *testing.B) {
	for _, order := range []string{"temperature-first", "temperature-last"} {
		b.Run(order, func(b *testing.B) {
			benchEach(b, func(int) core.LogitsProcessor {
				pen := must(processors.NewPenalties(1.1, 0.1, 0.1, processors.Window{LastN: 64}))
				temp := must(processors.NewTemperature(0.8))
				topK := must(processors.NewTopK(40))
				topP := must(processors.NewTopP(0.95, 1))
				minP := must(processors.NewMinP(0.05, 1))
				if order == "temperature-first" {
					return core.Chain{pen, temp, topK, topP, minP}
				}
				return core.Chain{pen, topK, topP, minP, temp}
			}, true)
		})
	}
}

// BenchmarkGreedy is the argmax of a fresh row (llama.cpp: 30 µs and 150 µs).
func BenchmarkGreedy(b *testing.B) {
	for _, vocab := range benchVocabs {
		b.Run(fmt.Sprintf("vocab=%d", vocab), func(b *testing.B) {
			e := newBenchEnv(b, vocab)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.fresh().Argmax(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
