package strategies_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/strategies"
)

// The benchmarks here run on the embedded models: the ~5.5M-parameter target and its ~0.6M
// draft (same tokenizer). Each reports time per generated token, so strategies compare
// directly; speculative ones also report their acceptance rate and target forwards per token.

func openEmbedded(b *testing.B, name string) (*llama.Model, core.Tokenizer) {
	b.Helper()
	m, tok, err := models.Open(name, llama.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m, tok
}

func benchDecode(b *testing.B, p *core.Pipeline, req core.Request) {
	b.Helper()
	var tokens, forwards, drafted, accepted int
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req.Seed = core.SeedOf(uint64(i))
		res, err := core.Generate(context.Background(), p, req)
		if err != nil {
			b.Fatal(err)
		}
		tokens += len(res.Sequences[0].Tokens) // the output: for beam search, one token per step
		forwards += res.Stats.Forwards
		drafted += res.Stats.Drafted
		accepted += res.Stats.Accepted
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens), "ns/token")
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(float64(forwards)/float64(tokens), "forwards/token")
	if drafted > 0 {
		b.ReportMetric(float64(accepted)/float64(drafted), "acceptance")
	}
}

const storyPrompt = "And it came to pass, when the king had heard these words,"

// BenchmarkSpeculative compares target-only decoding with speculative decoding driven by the
// embedded draft model, greedy and sampled (temperature 0.8, top-p 0.95).
func BenchmarkSpeculative(b *testing.B) {
	target, tok := openEmbedded(b, "default")
	draft, _ := openEmbedded(b, "draft")
	chain := func(greedy bool) []core.LogitsProcessor {
		if greedy {
			return nil
		}
		t, _ := processors.NewTemperature(0.8)
		p, _ := processors.NewTopP(0.95, 1)
		return []core.LogitsProcessor{t, p}
	}
	req := core.Request{Prompt: storyPrompt, MaxNewTokens: 128, IgnoreEOS: true}
	for _, greedy := range []bool{true, false} {
		mode := "sample"
		var plain core.Strategy = strategies.Ancestral{}
		if greedy {
			mode, plain = "greedy", strategies.Greedy{}
		}
		b.Run(mode+"/target-only", func(b *testing.B) {
			benchDecode(b, &core.Pipeline{Model: target, Tokenizer: tok, Strategy: plain, Processors: chain(greedy)}, req)
		})
		for _, k := range []int{2, 4, 6} {
			sp, err := strategies.NewSpeculative(strategies.SpeculativeConfig{Draft: draft, K: k, Greedy: greedy})
			if err != nil {
				b.Fatal(err)
			}
			b.Run(mode+"/draft-k"+string(rune('0'+k)), func(b *testing.B) {
				benchDecode(b, &core.Pipeline{Model: target, Tokenizer: tok, Strategy: sp, Processors: chain(greedy)}, req)
			})
		}
		sp, err := strategies.NewSpeculative(strategies.SpeculativeConfig{Draft: draft, K: 4, Greedy: greedy, Policy: strategies.KCost})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(mode+"/draft-cost", func(b *testing.B) {
			benchDecode(b, &core.Pipeline{Model: target, Tokenizer: tok, Strategy: sp, Processors: chain(greedy)}, req)
		})
	}
}

// BenchmarkPromptLookup compares greedy decoding with greedy prompt-lookup speculation on a
// copy-heavy prompt: a passage, then its own first words again.
func BenchmarkPromptLookup(b *testing.B) {
	target, tok := openEmbedded(b, "default")
	passage := "In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters."
	prompt := passage + "\n\n" + strings.Join(strings.Fields(passage)[:8], " ")
	req := core.Request{Prompt: prompt, MaxNewTokens: 64, IgnoreEOS: true}
	b.Run("greedy", func(b *testing.B) {
		benchDecode(b, &core.Pipeline{Model: target, Tokenizer: tok, Strategy: strategies.Greedy{}}, req)
	})
	for _, k := range []int{4, 8} {
		sp, err := strategies.NewSpeculative(strategies.SpeculativeConfig{K: k, NGram: 3, Greedy: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("lookup-k"+string(rune('0'+k)), func(b *testing.B) {
			benchDecode(b, &core.Pipeline{Model: target, Tokenizer: tok, Strategy: sp}, req)
		})
	}
	sp, err := strategies.NewSpeculative(strategies.SpeculativeConfig{K: 4, NGram: 3, Greedy: true, Policy: strategies.KCost})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("lookup-cost", func(b *testing.B) {
		benchDecode(b, &core.Pipeline{Model: target, Tokenizer: tok, Strategy: sp}, req)
	})
}

// BenchmarkBeam compares greedy decoding with beam search of 4 and 8 beams, with the beams'
// prefix shared copy-on-write in the cache and with every fork a full copy.
func BenchmarkBeam(b *testing.B) {
	target, tok := openEmbedded(b, "default")
	prompt := strings.Repeat(storyPrompt+" ", 8) // a long prefix makes copying visible
	req := core.Request{Prompt: prompt, MaxNewTokens: 48, IgnoreEOS: true}
	b.Run("greedy", func(b *testing.B) {
		benchDecode(b, &core.Pipeline{Model: target, Tokenizer: tok, Strategy: strategies.Greedy{}}, req)
	})
	for _, beams := range []int{4, 8} {
		for _, copyForks := range []bool{false, true} {
			name := "shared"
			if copyForks {
				name = "copied"
			}
			st, err := strategies.NewBeam(strategies.BeamConfig{NumBeams: beams, LengthPenalty: 1, CopyForks: copyForks})
			if err != nil {
				b.Fatal(err)
			}
			b.Run("beams"+string(rune('0'+beams))+"/"+name, func(b *testing.B) {
				benchDecode(b, &core.Pipeline{Model: target, Tokenizer: tok, Strategy: st}, req)
			})
		}
	}
}
