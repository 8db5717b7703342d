package strategies_test

import (
	"context"
	"math"
	"sort"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/stattest"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

// The chain the exactness tests run: temperature 1.3, then top-3.
const (
	exactTemp = 1.3
	exactTopK = 3
	exactLen  = 5
)

func exactChain() []core.LogitsProcessor {
	temp := core.ProcessorFunc(func(_ *core.Sequence, c *core.Candidates) error {
		for i := range c.Dense() {
			c.Dense()[i] /= exactTemp
		}
		return nil
	})
	topK := core.ProcessorFunc(func(_ *core.Sequence, c *core.Candidates) error {
		c.Sort()
		c.SetItems(c.Items()[:exactTopK], true)
		return nil
	})
	return []core.LogitsProcessor{temp, topK}
}

// exactJoint enumerates every continuation of exactLen tokens with its probability under the
// chain, computed in float64 from the model's table.
func exactJoint(m *testmodel.Model, prompt []core.TokenID) map[[exactLen]core.TokenID]float64 {
	out := map[[exactLen]core.TokenID]float64{}
	row := make([]float32, m.Config().VocabSize)
	var walk func(ctx []core.TokenID, gen [exactLen]core.TokenID, depth int, p float64)
	walk = func(ctx []core.TokenID, gen [exactLen]core.TokenID, depth int, p float64) {
		if depth == exactLen {
			out[gen] = p
			return
		}
		m.Row(row, ctx)
		ids := make([]int, len(row))
		for i := range ids {
			ids[i] = i
		}
		sort.SliceStable(ids, func(a, b int) bool { return row[ids[a]] > row[ids[b]] })
		ids = ids[:exactTopK]
		var z float64
		weights := make([]float64, len(ids)) // row is reused by the recursion: read it first
		for i, id := range ids {
			weights[i] = math.Exp(float64(row[id]) / exactTemp)
			z += weights[i]
		}
		for i, id := range ids {
			g := gen
			g[depth] = core.TokenID(id)
			walk(append(append([]core.TokenID(nil), ctx...), core.TokenID(id)), g, depth+1, p*weights[i]/z)
		}
	}
	walk(prompt, [exactLen]core.TokenID{}, 0, 1)
	return out
}

// TestSpeculativeSamplingIsExact draws 20 000 seeded continuations with each strategy and
// tests them against the target-only joint distribution of the first five tokens.
func TestSpeculativeSamplingIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical test")
	}
	m, tok := testmodel.Default()
	// The prompt repeats the start of the target's own greedy text, so prompt lookup finds
	// matches whose continuations the target finds likely.
	g := generate(t, m, tok, strategies.Greedy{}, core.Request{Prompt: "the", MaxNewTokens: 12, IgnoreEOS: true}).Sequences[0].Tokens
	prompt := append(append([]core.TokenID{testmodel.BOS}, g...), g[:5]...)
	// A draft with the target's table at another scale agrees with it often but not always.
	flatter, _ := testmodel.New(testmodel.Config{Scale: 2})
	joint := exactJoint(m, prompt)
	keys := make([][exactLen]core.TokenID, 0, len(joint))
	for k := range joint {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		for d := 0; d < exactLen; d++ {
			if keys[i][d] != keys[j][d] {
				return keys[i][d] < keys[j][d]
			}
		}
		return false
	})
	index := map[[exactLen]core.TokenID]int{}
	probs := make([]float64, len(keys))
	for i, k := range keys {
		index[k] = i
		probs[i] = joint[k]
	}
	const draws = 20000
	cases := []struct {
		name     string
		strategy core.Strategy
	}{
		{"plain sampling", strategies.Ancestral{}},
		{"unrelated draft k=2", mustSpec(t, strategies.SpeculativeConfig{Draft: draftFor(9), K: 2})},
		{"draft k=1", mustSpec(t, strategies.SpeculativeConfig{Draft: flatter, K: 1})},
		{"draft k=2", mustSpec(t, strategies.SpeculativeConfig{Draft: flatter, K: 2})},
		{"draft k=4", mustSpec(t, strategies.SpeculativeConfig{Draft: flatter, K: 4})},
		{"draft k=3 adaptive", mustSpec(t, strategies.SpeculativeConfig{Draft: flatter, K: 3, Policy: strategies.KAcceptance})},
		{"draft k=2 cost policy", mustSpec(t, strategies.SpeculativeConfig{Draft: flatter, K: 2, Policy: strategies.KCost})},
		{"prompt lookup k=4", mustSpec(t, strategies.SpeculativeConfig{K: 4, NGram: 2})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: c.strategy, Processors: exactChain()}
			counts := make([]int, len(keys))
			var stats core.Stats
			for seed := uint64(1); seed <= draws; seed++ {
				res, err := core.Generate(context.Background(), p, core.Request{PromptTokens: prompt, MaxNewTokens: exactLen, IgnoreEOS: true, Seed: core.SeedOf(seed)})
				if err != nil {
					t.Fatal(err)
				}
				var k [exactLen]core.TokenID
				copy(k[:], res.Sequences[0].Tokens)
				i, ok := index[k]
				if !ok {
					t.Fatalf("seed %d produced %v, outside the top-%d support", seed, k, exactTopK)
				}
				counts[i]++
				stats.Drafted += res.Stats.Drafted
				stats.Accepted += res.Stats.Accepted
			}
			r, err := stattest.ChiSquare(counts, probs)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s; drafted %d, accepted %d", r, stats.Drafted, stats.Accepted)
			if r.PValue < 1e-3 {
				t.Fatalf("speculative samples do not follow the target distribution: %s", r)
			}
			if c.name != "plain sampling" && (stats.Drafted == 0 || stats.Accepted == 0 || stats.Accepted == stats.Drafted) {
				t.Fatalf("the test exercises neither acceptance nor rejection: drafted %d accepted %d", stats.Drafted, stats.Accepted)
			}
		})
	}
}
