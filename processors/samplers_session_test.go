package processors_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

// The stateful samplers (DRY's window, XTC's coins, mirostat's μ) follow each sequence on its
// own: with n > 1 samples and with beam search, every returned sequence is replayed token by
// token against float64 references that see only that sequence's tokens (and, for XTC, its own
// coin stream), and its recorded scores — the log-probability of each chosen token under the
// processed distribution — must match. State leaking between sequences or beams would change
// the kept sets and the scores.

// refProc is a float64 reference of one processor over a replayed sequence.
type refProc interface {
	// apply processes x, the logits after the previous stage, for a sequence holding ctx.
	apply(x []float64, ctx []core.TokenID) []float64
	// accept observes the chosen token; out is what apply returned at that step.
	accept(out []float64, tok core.TokenID)
}

type refDRYProc struct {
	mult, base     float64
	allowed, lastN int
}

func (r refDRYProc) apply(x []float64, ctx []core.TokenID) []float64 {
	return refDRY(x, ctx, r.mult, r.base, r.allowed, r.lastN, func(core.TokenID) bool { return false })
}
func (refDRYProc) accept([]float64, core.TokenID) {}

type refMirostatProc struct{ tau, eta, mu float64 }

func (r *refMirostatProc) apply(x []float64, _ []core.TokenID) []float64 {
	return refMirostatV2(x, r.mu)
}

func (r *refMirostatProc) accept(out []float64, tok core.TokenID) {
	r.mu -= r.eta * (-math.Log2(softmax(out)[tok]) - r.tau)
}

type refXTCProc struct {
	threshold, probability float64
	coins                  *rand.Rand // nil: the coin always says yes
}

func (r refXTCProc) apply(x []float64, _ []core.TokenID) []float64 {
	if r.coins != nil && r.coins.Float64() >= r.probability {
		return x
	}
	return refXTC(x, r.threshold, 1)
}
func (refXTCProc) accept([]float64, core.TokenID) {}

type refTempProc struct{ t float64 }

func (r refTempProc) apply(x []float64, _ []core.TokenID) []float64 { return refTemperature(x, r.t) }
func (refTempProc) accept([]float64, core.TokenID)                  {}

// replay checks one returned sequence: at every step the chosen token must be possible under
// the reference chain and its recorded score must be its log-probability there.
func replay(t *testing.T, m *testmodel.Model, prompt []core.TokenID, sr core.SequenceResult, chain []refProc) {
	t.Helper()
	if len(sr.Scores) != len(sr.Tokens) {
		t.Fatalf("sequence %d: %d scores for %d tokens", sr.Index, len(sr.Scores), len(sr.Tokens))
	}
	row := make([]float32, m.Config().VocabSize)
	ctx := slices.Clone(prompt)
	outs := make([][]float64, len(chain))
	for step, tok := range sr.Tokens {
		x := toF64(m.Row(row, ctx))
		for i, r := range chain {
			x = r.apply(x, ctx)
			outs[i] = x
		}
		p := softmax(x)[tok]
		if !(p > 0) {
			t.Fatalf("sequence %d step %d: token %d is outside the reference's kept set", sr.Index, step, tok)
		}
		if got := float64(sr.Scores[step]); math.Abs(got-math.Log(p)) > 2e-3 {
			t.Fatalf("sequence %d step %d: score %.5f, reference log p = %.5f", sr.Index, step, got, math.Log(p))
		}
		for i, r := range chain {
			r.accept(outs[i], tok)
		}
		ctx = append(ctx, tok)
	}
}

// sessionModel is a small peaked model that repeats itself: its logits depend on the last
// token only, so loops — DRY's prey — are common.
func sessionModel() *testmodel.Model {
	m, _ := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: 24, Order: 1, Seed: 11, Scale: 2.5, ContextLength: 512})
	return m
}

func generate(t *testing.T, m *testmodel.Model, procs []core.LogitsProcessor, strategy core.Strategy, n int, seed uint64) (*core.Result, []core.TokenID) {
	t.Helper()
	_, tok := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: m.Config().VocabSize})
	prompt := []core.TokenID{5, 6, 7, 5, 6}
	p := &core.Pipeline{Model: m, Tokenizer: tok, Processors: procs, Strategy: strategy}
	res, err := core.Generate(context.Background(), p, core.Request{
		PromptTokens: prompt, MaxNewTokens: 40, N: n, Seed: core.SeedOf(seed), IgnoreEOS: true,
		Return: core.ReturnOptions{Logprobs: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, prompt
}

func distinct(res *core.Result) int {
	var seen [][]core.TokenID
	for _, s := range res.Sequences {
		if !slices.ContainsFunc(seen, func(x []core.TokenID) bool { return slices.Equal(x, s.Tokens) }) {
			seen = append(seen, s.Tokens)
		}
	}
	return len(seen)
}

func TestStatefulSamplersPerSample(t *testing.T) {
	m := sessionModel()
	const seed, n = 21, 4
	cases := []struct {
		name  string
		procs func() []core.LogitsProcessor
		refs  func(index int) []refProc
	}{
		{"dry", func() []core.LogitsProcessor {
			return []core.LogitsProcessor{
				must(processors.NewDRY(processors.DRYConfig{Multiplier: 1.5, Base: 1.75, AllowedLength: 1, LastN: 32}, nil))}
		}, func(int) []refProc { return []refProc{refDRYProc{1.5, 1.75, 1, 32}} }},
		{"mirostat v2", func() []core.LogitsProcessor {
			return []core.LogitsProcessor{must(processors.NewTemperature(1.3)),
				must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 2, Eta: 0.3}))}
		}, func(int) []refProc { return []refProc{refTempProc{1.3}, &refMirostatProc{tau: 2, eta: 0.3, mu: 4}} }},
		{"xtc", func() []core.LogitsProcessor {
			return []core.LogitsProcessor{must(processors.NewTemperature(1.5)), must(processors.NewXTC(0.1, 0.5, 1))}
		}, func(index int) []refProc {
			return []refProc{refTempProc{1.5}, refXTCProc{0.1, 0.5, core.DeriveStream(seed, index, "xtc")}}
		}},
		{"dry→xtc→mirostat", func() []core.LogitsProcessor {
			return []core.LogitsProcessor{
				must(processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, AllowedLength: 2, LastN: -1}, nil)),
				must(processors.NewXTC(0.1, 0.7, 1)),
				must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 2.5, Eta: 0.2}))}
		}, func(index int) []refProc {
			return []refProc{refDRYProc{0.8, 1.75, 2, -1}, refXTCProc{0.1, 0.7, core.DeriveStream(seed, index, "xtc")},
				&refMirostatProc{tau: 2.5, eta: 0.2, mu: 5}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, prompt := generate(t, m, tc.procs(), strategies.Ancestral{}, n, seed)
			if len(res.Sequences) != n || distinct(res) < 2 {
				t.Fatalf("%d sequences, %d distinct: the test needs different samples", len(res.Sequences), distinct(res))
			}
			for i, s := range res.Sequences {
				replay(t, m, prompt, s, tc.refs(i))
			}
			// Same seed, same output.
			again, _ := generate(t, m, tc.procs(), strategies.Ancestral{}, n, seed)
			for i := range res.Sequences {
				if !slices.Equal(res.Sequences[i].Tokens, again.Sequences[i].Tokens) {
					t.Fatalf("sequence %d differs between two runs with the same seed", i)
				}
			}
		})
	}
}

func TestStatefulSamplersPerBeam(t *testing.T) {
	m := sessionModel()
	beam, err := strategies.NewBeam(strategies.BeamConfig{NumBeams: 4, NumReturn: 4})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		procs func() []core.LogitsProcessor
		refs  func() []refProc
	}{
		{"dry", func() []core.LogitsProcessor {
			return []core.LogitsProcessor{
				must(processors.NewDRY(processors.DRYConfig{Multiplier: 1.5, Base: 1.75, AllowedLength: 1, LastN: 32}, nil))}
		}, func() []refProc { return []refProc{refDRYProc{1.5, 1.75, 1, 32}} }},
		{"mirostat v2", func() []core.LogitsProcessor {
			return []core.LogitsProcessor{must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 1.5, Eta: 0.5}))}
		}, func() []refProc { return []refProc{&refMirostatProc{tau: 1.5, eta: 0.5, mu: 3}} }},
		{"xtc always→dry→mirostat", func() []core.LogitsProcessor {
			return []core.LogitsProcessor{
				must(processors.NewXTC(0.1, 1, 1)),
				must(processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, AllowedLength: 2, LastN: -1}, nil)),
				must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 2, Eta: 0.4}))}
		}, func() []refProc {
			return []refProc{refXTCProc{0.1, 1, nil}, refDRYProc{0.8, 1.75, 2, -1}, &refMirostatProc{tau: 2, eta: 0.4, mu: 4}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, prompt := generate(t, m, tc.procs(), beam, 1, 5)
			if len(res.Sequences) != 4 || distinct(res) < 2 {
				t.Fatalf("%d beams, %d distinct", len(res.Sequences), distinct(res))
			}
			for _, s := range res.Sequences {
				replay(t, m, prompt, s, tc.refs())
			}
		})
	}
}

// With XTC's coin in play, beams fork into new sequences with their own coin streams; the
// search is still reproducible, and every token each beam chose is possible under one of the
// two outcomes of its coin.
func TestXTCWithBeamIsReproducible(t *testing.T) {
	m := sessionModel()
	beam, err := strategies.NewBeam(strategies.BeamConfig{NumBeams: 3, NumReturn: 3})
	if err != nil {
		t.Fatal(err)
	}
	procs := func() []core.LogitsProcessor { return []core.LogitsProcessor{must(processors.NewXTC(0.1, 0.5, 1))} }
	a, prompt := generate(t, m, procs(), beam, 1, 8)
	b, _ := generate(t, m, procs(), beam, 1, 8)
	for i := range a.Sequences {
		if !slices.Equal(a.Sequences[i].Tokens, b.Sequences[i].Tokens) {
			t.Fatalf("beam %d differs between runs", i)
		}
		ctx := slices.Clone(prompt)
		row := make([]float32, m.Config().VocabSize)
		for step, tok := range a.Sequences[i].Tokens {
			x := toF64(m.Row(row, ctx))
			score := float64(a.Sequences[i].Scores[step])
			on, off := softmax(refXTC(x, 0.1, 1))[tok], softmax(x)[tok]
			if math.Abs(score-math.Log(on)) > 2e-3 && math.Abs(score-math.Log(off)) > 2e-3 {
				t.Fatalf("beam %d step %d: score %.4f matches neither coin outcome (%.4f, %.4f)", i, step, score, math.Log(on), math.Log(off))
			}
			ctx = append(ctx, tok)
		}
	}
}

// Speculative decoding runs the chain on draft rows, rolls the processors back and verifies on
// the target's rows: the committed tokens must still see each stateful sampler exactly as plain
// sampling would — DRY on the committed tokens, one XTC coin per committed token from the
// sequence's stream, μ updated by committed tokens only.
func TestStatefulSamplersUnderSpeculativeDecoding(t *testing.T) {
	m := sessionModel()
	draft, _ := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: 24, Order: 1, Seed: 12, Scale: 2.5, ContextLength: 512})
	for _, greedy := range []bool{false, true} {
		spec, err := strategies.NewSpeculative(strategies.SpeculativeConfig{Draft: draft, K: 3, Greedy: greedy})
		if err != nil {
			t.Fatal(err)
		}
		const seed = 13
		procs := func() []core.LogitsProcessor {
			return []core.LogitsProcessor{
				must(processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, AllowedLength: 2, LastN: -1}, nil)),
				must(processors.NewXTC(0.1, 0.5, 1)),
				must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 2.5, Eta: 0.2}))}
		}
		res, prompt := generate(t, m, procs(), spec, 2, seed)
		if res.Stats.Accepted == 0 {
			t.Fatalf("greedy=%v: no draft accepted, the test does not exercise rollbacks", greedy)
		}
		for i, s := range res.Sequences {
			replay(t, m, prompt, s, []refProc{refDRYProc{0.8, 1.75, 2, -1},
				refXTCProc{0.1, 0.5, core.DeriveStream(seed, i, "xtc")}, &refMirostatProc{tau: 2.5, eta: 0.2, mu: 5}})
		}
		again, _ := generate(t, m, procs(), spec, 2, seed)
		for i := range res.Sequences {
			if !slices.Equal(res.Sequences[i].Tokens, again.Sequences[i].Tokens) {
				t.Fatalf("greedy=%v: sequence %d differs between runs", greedy, i)
			}
		}
	}
}
