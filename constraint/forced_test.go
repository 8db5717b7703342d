package constraint_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/loomlm/loom/constraint"
	loomschema "github.com/loomlm/loom/constraint/jsonschema"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/strategies"
)

// forcedRun generates under orderSchema with greedy or sampling, with or without forced
// tokens, returning the result.
func forcedRun(t testing.TB, model core.Model, tok core.Tokenizer, sample, force bool, seed uint64) *core.Result {
	t.Helper()
	p, err := constraint.NewJSONSchema([]byte(orderSchema), loomschema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var strategy core.Strategy = strategies.Greedy{ForceTokens: force}
	chain := []core.LogitsProcessor{p}
	if sample {
		strategy = strategies.Ancestral{ForceTokens: force}
		temp, _ := processors.NewTemperature(0.9)
		chain = append(chain, temp)
	}
	pipe := &core.Pipeline{Model: model, Tokenizer: tok, Processors: chain, Strategy: strategy}
	res, err := core.Generate(context.Background(), pipe, core.Request{
		Prompt: "The order, as JSON:", MaxNewTokens: 200, Seed: core.SeedOf(seed),
		Return: core.ReturnOptions{Logprobs: true, TopLogprobs: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestForcedTokensChangeNothingButForwards generates under a JSON schema with greedy and with
// sampling (20 seeds), with and without force_tokens: the sequences — tokens, text, processed
// scores, raw log-probabilities and top tokens (filled in by the forward that runs a forced
// token) — are identical, and forcing saves forwards.
func TestForcedTokensChangeNothingButForwards(t *testing.T) {
	model, tok := openDefault(t)
	forced, saved, tokens := 0, 0, 0
	for _, sample := range []bool{false, true} {
		seeds := 1
		if sample {
			seeds = 20
		}
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			plain := forcedRun(t, model, tok, sample, false, seed)
			fast := forcedRun(t, model, tok, sample, true, seed)
			if !reflect.DeepEqual(plain.Sequences, fast.Sequences) {
				t.Fatalf("sample %v seed %d: forcing changed the output:\n%+v\n%+v", sample, seed, plain.Sequences[0], fast.Sequences[0])
			}
			if plain.Stats.ForcedTokens != 0 {
				t.Fatalf("forced tokens counted without force_tokens")
			}
			forced += fast.Stats.ForcedTokens
			tokens += len(fast.Sequences[0].Tokens)
			saved += plain.Stats.Forwards - fast.Stats.Forwards
		}
	}
	// A forced token runs with the next one, one forward fewer, unless the sequence stops
	// right after it (no forward follows either way).
	if saved == 0 || saved > forced {
		t.Fatalf("%d tokens forced, %d forwards saved: want 0 < saved ≤ forced", forced, saved)
	}
	t.Logf("%d of %d tokens forced, %d forwards saved", forced, tokens, saved)
}

// BenchmarkForcedTokens times greedy generation of 200 tokens under a JSON schema on the
// embedded model without and with force_tokens, alternating within every iteration, and
// reports both per-token times, their ratio and the forwards per token of each.
func BenchmarkForcedTokens(b *testing.B) {
	model, tok := openDefault(b)
	var elapsed [2]time.Duration
	var tokens, forwards [2]int
	for b.Loop() {
		for i, force := range []bool{false, true} {
			t0 := time.Now()
			res := forcedRun(b, model, tok, false, force, 1)
			elapsed[i] += time.Since(t0)
			tokens[i] += len(res.Sequences[0].Tokens)
			forwards[i] += res.Stats.Forwards
		}
	}
	per := func(i int) float64 { return float64(elapsed[i].Microseconds()) / float64(tokens[i]) }
	b.ReportMetric(per(0), "plain-µs/token")
	b.ReportMetric(per(1), "forced-µs/token")
	b.ReportMetric(per(0)/per(1), "speedup")
	b.ReportMetric(float64(forwards[0])/float64(tokens[0]), "plain-forwards/token")
	b.ReportMetric(float64(forwards[1])/float64(tokens[1]), "forced-forwards/token")
}
