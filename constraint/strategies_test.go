package constraint_test

import (
	"context"
	"testing"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
	"github.com/loomlm/loom/strategies"
)

// TestConstraintUnderStrategies runs the person grammar under beam search, speculative
// decoding with a draft model (sampling and greedy) and prompt lookup, and n > 1 sampling:
// every returned sequence ends with EOS and is a sentence of the grammar. Greedy speculation
// under the constraint returns exactly what greedy decoding under it returns.
func TestConstraintUnderStrategies(t *testing.T) {
	model, tok := openDefault(t)
	draft, _, err := models.Open("draft", llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer draft.Close()
	cfg := grammar.MustCompile(personGrammar)
	beam, err := strategies.NewBeam(strategies.BeamConfig{NumBeams: 3, NumReturn: 3})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(c strategies.SpeculativeConfig) core.Strategy {
		s, err := strategies.NewSpeculative(c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := func(st core.Strategy, n int, seed uint64) *core.Result {
		p, err := constraint.NewGrammar(personGrammar)
		if err != nil {
			t.Fatal(err)
		}
		pipe := &core.Pipeline{Model: model, Tokenizer: tok, Processors: []core.LogitsProcessor{p}, Strategy: st}
		res, err := core.Generate(context.Background(), pipe, core.Request{
			Prompt: "And Moses said unto the people", MaxNewTokens: 120, Seed: core.SeedOf(seed), N: n})
		if err != nil {
			t.Fatalf("%s: %v", st.Name(), err)
		}
		for _, s := range res.Sequences {
			m := earley.New(cfg)
			if _, ok := m.AdvanceBytes([]byte(s.Text)); !ok || !m.IsAccepting() || s.FinishReason != core.FinishEOS {
				t.Fatalf("%s seed %d sequence %d: %q (finish %q) is not a complete sentence", st.Name(), seed, s.Index, s.Text, s.FinishReason)
			}
		}
		return res
	}
	for seed := range uint64(3) {
		run(beam, 1, seed)
		run(spec(strategies.SpeculativeConfig{Draft: draft, K: 4}), 2, seed)
		run(spec(strategies.SpeculativeConfig{K: 3, NGram: 3}), 1, seed)
		run(strategies.Ancestral{}, 4, seed)
	}
	greedy := run(strategies.Greedy{}, 1, 0).Sequences[0].Text
	specGreedy := run(spec(strategies.SpeculativeConfig{Draft: draft, K: 4, Greedy: true}), 1, 0).Sequences[0].Text
	if greedy != specGreedy {
		t.Fatalf("greedy speculation under the grammar gave %q, greedy %q", specGreedy, greedy)
	}
}
