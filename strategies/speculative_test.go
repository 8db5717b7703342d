package strategies_test

import (
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

func mustSpec(t *testing.T, cfg strategies.SpeculativeConfig) *strategies.Speculative {
	t.Helper()
	sp, err := strategies.NewSpeculative(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// draftFor returns a draft model sharing the target's vocabulary but with a different table.
func draftFor(seed uint64) *testmodel.Model {
	d, _ := testmodel.New(testmodel.Config{Seed: seed})
	return d
}

func TestGreedySpeculationEqualsGreedy(t *testing.T) {
	m, tok := testmodel.Default()
	req := core.Request{Prompt: "the cat sat on the mat and the cat sat on", MaxNewTokens: 60, IgnoreEOS: true}
	want := generate(t, m, tok, strategies.Greedy{}, req).Sequences[0].Tokens
	for _, c := range []struct {
		name string
		cfg  strategies.SpeculativeConfig
	}{
		{"draft model k=1", strategies.SpeculativeConfig{Draft: draftFor(9), K: 1, Greedy: true}},
		{"draft model k=4", strategies.SpeculativeConfig{Draft: draftFor(9), K: 4, Greedy: true}},
		{"draft = target", strategies.SpeculativeConfig{Draft: m, K: 5, Greedy: true}},
		{"adaptive", strategies.SpeculativeConfig{Draft: draftFor(3), K: 3, Greedy: true, Policy: strategies.KAcceptance}},
		{"cost policy", strategies.SpeculativeConfig{Draft: draftFor(3), K: 3, Greedy: true, Policy: strategies.KCost}},
		{"prompt lookup", strategies.SpeculativeConfig{K: 4, Greedy: true}},
		{"prompt lookup, cost policy", strategies.SpeculativeConfig{K: 4, Greedy: true, Policy: strategies.KCost}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := generate(t, m, tok, mustSpec(t, c.cfg), req)
			if got := res.Sequences[0].Tokens; !slices.Equal(got, want) {
				t.Fatalf("speculative greedy:\n%v\ngreedy:\n%v", got, want)
			}
			st := res.Stats
			if st.Drafted == 0 || st.Accepted > st.Drafted {
				t.Fatalf("stats %+v", st)
			}
			steps := 0
			for k, n := range st.DraftK {
				steps += n
				if k > 0 && n > 0 && c.cfg.Policy != strategies.KCost && k > 2*c.cfg.K {
					t.Errorf("%d steps drafted %d tokens, over 2k", n, k)
				}
			}
			if steps == 0 || steps > len(want) {
				t.Errorf("DraftK %v counts %d steps for %d tokens", st.DraftK, steps, len(want))
			}
			if c.name == "draft = target" && st.Accepted != st.Drafted {
				t.Errorf("a draft equal to the target must be always accepted: %+v", st)
			}
			if c.name == "draft = target" && st.Forwards >= len(want) {
				t.Errorf("%d target forwards for %d tokens: speculation saved nothing", st.Forwards, len(want))
			}
		})
	}
}

func TestSpeculativeRespectsLimitsAndStops(t *testing.T) {
	m, tok := testmodel.Default()
	for _, max := range []int{1, 2, 5, 17} {
		res := generate(t, m, tok, mustSpec(t, strategies.SpeculativeConfig{Draft: m, K: 4}),
			core.Request{Prompt: "the", MaxNewTokens: max, IgnoreEOS: true, Seed: core.SeedOf(1), N: 2})
		for _, s := range res.Sequences {
			if len(s.Tokens) != max || s.FinishReason != core.FinishLength {
				t.Errorf("max %d: %d tokens, %s", max, len(s.Tokens), s.FinishReason)
			}
		}
	}
}

func TestCheckSameTokenizer(t *testing.T) {
	m, tok := testmodel.Default()
	other, otherTok := testmodel.New(testmodel.Config{Words: append(slices.Clone(testmodel.Words[:len(testmodel.Words)-1]), "zebra")})
	if err := strategies.CheckSameTokenizer(tok, tok, m, m); err != nil {
		t.Fatal(err)
	}
	if err := strategies.CheckSameTokenizer(tok, otherTok, m, other); err == nil {
		t.Fatal("different vocabularies accepted")
	}
	small, smallTok := testmodel.New(testmodel.Config{Words: []string{"a"}})
	if err := strategies.CheckSameTokenizer(tok, smallTok, m, small); err == nil {
		t.Fatal("different vocabulary sizes accepted")
	}
}

// TestSpeculativePlainSteps checks a step that drafts nothing (here the last token, with no
// room for a draft and its bonus token; the cost policy's k = 0 takes the same path): it
// decodes as the target alone would, greedy or sampled, and counts as a step of zero drafts.
func TestSpeculativePlainSteps(t *testing.T) {
	m, tok := testmodel.Default()
	for _, greedy := range []bool{true, false} {
		req := core.Request{Prompt: "the cat sat on", MaxNewTokens: 1, IgnoreEOS: true, Seed: core.SeedOf(7)}
		var alone core.Strategy = strategies.Ancestral{}
		if greedy {
			alone = strategies.Greedy{}
		}
		want := generate(t, m, tok, alone, req).Sequences[0].Tokens
		res := generate(t, m, tok, mustSpec(t, strategies.SpeculativeConfig{Draft: draftFor(9), K: 4, Greedy: greedy}), req)
		if got := res.Sequences[0].Tokens; !slices.Equal(got, want) {
			t.Fatalf("greedy %v: speculative %v, target alone %v", greedy, got, want)
		}
		if res.Stats.Drafted != 0 || !slices.Equal(res.Stats.DraftK, []int{1}) {
			t.Fatalf("greedy %v: stats %+v, want one step of zero drafts", greedy, res.Stats)
		}
	}
}
