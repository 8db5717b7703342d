package strategies_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

func generate(t *testing.T, m core.Model, tok core.Tokenizer, st core.Strategy, req core.Request, procs ...core.LogitsProcessor) *core.Result {
	t.Helper()
	res, err := core.Generate(context.Background(), &core.Pipeline{Model: m, Tokenizer: tok, Strategy: st, Processors: procs}, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func mustBeam(t *testing.T, cfg strategies.BeamConfig) *strategies.Beam {
	t.Helper()
	b, err := strategies.NewBeam(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBeamOfOneIsGreedy(t *testing.T) {
	m, tok := testmodel.Default()
	req := core.Request{Prompt: "the cat", MaxNewTokens: 30}
	greedy := generate(t, m, tok, strategies.Greedy{}, req)
	beam := generate(t, m, tok, mustBeam(t, strategies.BeamConfig{NumBeams: 1}), req)
	if !slices.Equal(greedy.Sequences[0].Tokens, beam.Sequences[0].Tokens) {
		t.Fatalf("beam 1: %v\ngreedy: %v", beam.Sequences[0].Tokens, greedy.Sequences[0].Tokens)
	}
}

// The worked example: greedy takes A (0.5) then X (0.4) for 0.2, but B then EOS has 0.36.
func workedExample() (*testmodel.Model, *testmodel.Tokenizer) {
	const A, B, X, Y = 3, 4, 5, 6
	probs := func(dst []float32, pairs map[core.TokenID]float64) {
		for i := range dst {
			dst[i] = float32(math.Log(1e-9))
		}
		for id, p := range pairs {
			dst[id] = float32(math.Log(p))
		}
	}
	return testmodel.New(testmodel.Config{Words: []string{"A", "B", "X", "Y"}, Order: 1,
		RowFunc: func(dst []float32, ctx []core.TokenID) {
			switch ctx[len(ctx)-1] {
			case A:
				probs(dst, map[core.TokenID]float64{X: 0.4, Y: 0.3, testmodel.EOS: 0.3})
			case B:
				probs(dst, map[core.TokenID]float64{testmodel.EOS: 0.9, X: 0.1})
			case X, Y:
				probs(dst, map[core.TokenID]float64{testmodel.EOS: 1})
			default:
				probs(dst, map[core.TokenID]float64{A: 0.5, B: 0.4, X: 0.1})
			}
		}})
}

func TestBeamWorkedExample(t *testing.T) {
	m, tok := workedExample()
	req := core.Request{Prompt: "", MaxNewTokens: 3} // just BOS
	greedy := generate(t, m, tok, strategies.Greedy{}, req)
	if got := tok.Decode(greedy.Sequences[0].Tokens); got != "A X" {
		t.Fatalf("greedy gave %q, want \"A X\"", got)
	}
	cases := []struct {
		name      string
		cfg       strategies.BeamConfig
		wantTexts []string
		wantSums  []float64
	}{
		{"raw sums", strategies.BeamConfig{NumBeams: 2}, []string{"B"}, []float64{math.Log(0.4 * 0.9)}},
		{"two returned", strategies.BeamConfig{NumBeams: 2, NumReturn: 2}, []string{"B", "A X"}, []float64{math.Log(0.36), math.Log(0.2)}},
		// α = 2: A X </s> scores log(0.2)/3² = -0.179 > B </s> log(0.36)/2² = -0.255.
		{"length penalty 2", strategies.BeamConfig{NumBeams: 2, LengthPenalty: 2}, []string{"A X"}, []float64{math.Log(0.2)}},
		{"early stopping", strategies.BeamConfig{NumBeams: 2, EarlyStopping: true}, []string{"B"}, []float64{math.Log(0.36)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := generate(t, m, tok, mustBeam(t, c.cfg), req)
			if len(res.Sequences) != len(c.wantTexts) {
				t.Fatalf("%d sequences, want %d", len(res.Sequences), len(c.wantTexts))
			}
			for i, s := range res.Sequences {
				if got := tok.Decode(s.Tokens); got != c.wantTexts[i] || math.Abs(s.SumLogprob-c.wantSums[i]) > 1e-5 {
					t.Errorf("sequence %d: %q sum %.6f, want %q sum %.6f", i, got, s.SumLogprob, c.wantTexts[i], c.wantSums[i])
				}
				if s.Index != i {
					t.Errorf("sequence %d has index %d", i, s.Index)
				}
			}
		})
	}
}

// TestBeamEqualsExhaustiveSearch: with as many beams as there are sequences, beam search must
// return exactly the best sequences of an exhaustive enumeration.
func TestBeamEqualsExhaustiveSearch(t *testing.T) {
	const steps = 3
	for _, alpha := range []float64{0, 1, -0.5} {
		m, tok := testmodel.New(testmodel.Config{Words: []string{"a", "b", "c"}, Seed: 5, Scale: 1.5})
		V := m.Config().VocabSize
		prompt, _ := tok.Encode("a b", core.EncodeOptions{AddSpecial: true})
		type seqScore struct {
			toks  []core.TokenID
			sum   float64
			score float64
		}
		var all []seqScore
		row := make([]float32, V)
		var walk func(ctx []core.TokenID, gen []core.TokenID, sum float64)
		walk = func(ctx, gen []core.TokenID, sum float64) {
			m.Row(row, ctx)
			var z float64
			for _, v := range row {
				z += math.Exp(float64(v))
			}
			lse := math.Log(z)
			logp := make([]float64, V)
			for i, v := range row {
				logp[i] = float64(v) - lse
			}
			for id := 0; id < V; id++ {
				g := append(slices.Clone(gen), core.TokenID(id))
				s := sum + logp[id]
				if core.TokenID(id) == testmodel.EOS || len(g) == steps {
					sc := s
					if alpha != 0 {
						sc = s / math.Pow(float64(len(g)), alpha)
					}
					all = append(all, seqScore{g, s, sc})
					continue
				}
				walk(append(slices.Clone(ctx), core.TokenID(id)), g, s)
			}
		}
		walk(prompt, nil, 0)
		sort.SliceStable(all, func(i, j int) bool { return all[i].score > all[j].score })

		const R = 5
		beams := V * V * V
		res := generate(t, m, tok, mustBeam(t, strategies.BeamConfig{NumBeams: beams, NumReturn: R, LengthPenalty: alpha}),
			core.Request{PromptTokens: prompt, MaxNewTokens: steps})
		for i := 0; i < R; i++ {
			got := res.Sequences[i]
			if !slices.Equal(got.Tokens, all[i].toks) || math.Abs(got.Score-all[i].score) > 1e-4 {
				t.Errorf("α=%v rank %d: beam %v score %.5f, exhaustive %v score %.5f", alpha, i, got.Tokens, got.Score, all[i].toks, all[i].score)
			}
		}
	}
}

func TestBeamNoRepeatNGram(t *testing.T) {
	m, tok := testmodel.Default()
	res := generate(t, m, tok, mustBeam(t, strategies.BeamConfig{NumBeams: 3, NoRepeatNGram: 2}), core.Request{Prompt: "the cat", MaxNewTokens: 40, IgnoreEOS: true})
	toks := append(slices.Clone(res.PromptTokens), res.Sequences[0].Tokens...)
	seen := map[[2]core.TokenID]bool{}
	for i := 0; i+1 < len(toks); i++ {
		k := [2]core.TokenID{toks[i], toks[i+1]}
		if seen[k] {
			t.Fatalf("bigram %v repeats in %v", k, toks)
		}
		seen[k] = true
	}
}

func TestBeamSamplingIsSeeded(t *testing.T) {
	m, tok := testmodel.Default()
	b := mustBeam(t, strategies.BeamConfig{NumBeams: 4, DoSample: true})
	run := func(seed uint64) []core.TokenID {
		return generate(t, m, tok, b, core.Request{Prompt: "the", MaxNewTokens: 12, Seed: core.SeedOf(seed)}).Sequences[0].Tokens
	}
	if a, b2 := run(1), run(1); !slices.Equal(a, b2) {
		t.Fatal("same seed, different beams")
	}
	differs := false
	for seed := uint64(2); seed < 8 && !differs; seed++ {
		differs = !slices.Equal(run(1), run(seed))
	}
	if !differs {
		t.Fatal("beam sampling ignores the seed")
	}
}

func TestBeamValidation(t *testing.T) {
	for _, cfg := range []strategies.BeamConfig{
		{NumBeams: 0}, {NumBeams: 2, NumReturn: 3}, {NumBeams: 2, LengthPenalty: math.NaN()}, {NumBeams: 2, NoRepeatNGram: -1},
	} {
		if _, err := strategies.NewBeam(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		} else if _, ok := err.(*core.ParamError); !ok {
			t.Errorf("%+v: %T is not a *core.ParamError", cfg, err)
		}
	}
}

// TestBeamReturnsN checks a request's n against beam search: n > 1 takes num_return_sequences'
// place (the best n of the same search: a search for n sequences returns the configured
// search's best n), and more than num_beams is an error naming n.
func TestBeamReturnsN(t *testing.T) {
	m, tok := testmodel.New(testmodel.Config{Words: []string{"a", "b", "c", "d"}, Seed: 9, Scale: 1.5})
	prompt, _ := tok.Encode("a b", core.EncodeOptions{AddSpecial: true})
	st := mustBeam(t, strategies.BeamConfig{NumBeams: 4, NumReturn: 2})
	req := core.Request{PromptTokens: prompt, MaxNewTokens: 4}
	two := generate(t, m, tok, st, req)
	req.N = 3
	three := generate(t, m, tok, st, req)
	four := generate(t, m, tok, mustBeam(t, strategies.BeamConfig{NumBeams: 4, NumReturn: 3}), core.Request{PromptTokens: prompt, MaxNewTokens: 4})
	if len(two.Sequences) != 2 || len(three.Sequences) != 3 {
		t.Fatalf("n = 1: %d sequences, want num_return_sequences' 2; n = 3: %d, want 3", len(two.Sequences), len(three.Sequences))
	}
	for i, s := range three.Sequences {
		if !slices.Equal(s.Tokens, four.Sequences[i].Tokens) || s.Score != four.Sequences[i].Score {
			t.Errorf("n = 3, sequence %d: %v (%.5f), num_return_sequences = 3 gives %v (%.5f)", i, s.Tokens, s.Score, four.Sequences[i].Tokens, four.Sequences[i].Score)
		}
	}
	req.N = 5
	_, err := core.Generate(context.Background(), &core.Pipeline{Model: m, Tokenizer: tok, Strategy: st}, req)
	var pe *core.ParamError
	if !errors.As(err, &pe) || pe.Param != "n" || err.Error() != "n = 5: beam search returns at most num_beams = 4 sequences" {
		t.Fatalf("n = 5 with 4 beams: %v, want a ParamError naming n", err)
	}
}
