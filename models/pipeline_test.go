package models

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// build parses and builds a pipeline given as TOML text.
func build(t testing.TB, src string) *pipeline.Built {
	t.Helper()
	spec, err := pipeline.Parse("test.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pipeline.Build(spec, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

const greedyPipeline = `
[model]
builtin = "default"
[strategy]
type = "greedy"
`

const nucleusPipeline = `
[model]
builtin = "default"
[strategy]
type = "sample"
[[processors]]
type = "temperature"
t = 0.8
[[processors]]
type = "top_p"
p = 0.95
`

func speculativePipeline(greedy bool) string {
	s := `
[model]
builtin = "default"
[draft_model]
builtin = "draft"
[strategy]
type = "speculative"
k = 4
`
	if greedy {
		return s + "greedy = true\n"
	}
	return s + `[[processors]]
type = "temperature"
t = 0.8
[[processors]]
type = "top_p"
p = 0.95
`
}

func generate(t testing.TB, b *pipeline.Built, prompt string, n int, seed uint64) *core.Result {
	t.Helper()
	req := b.Request(prompt)
	req.MaxNewTokens = n
	req.Seed = core.SeedOf(seed)
	res, err := core.Generate(context.Background(), b.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var prompts = []string{"And God said", "The people of the United States", "The whale"}

// Greedy speculative decoding with the draft returns exactly the target's greedy output, and
// the draft's proposals are accepted often enough to be worth drafting.
func TestSpeculative(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a few hundred tokens with both models")
	}
	greedy := build(t, greedyPipeline)
	for _, mode := range []string{"greedy", "sampled"} {
		spec := build(t, speculativePipeline(mode == "greedy"))
		drafted, accepted := 0, 0
		for i, p := range prompts {
			res := generate(t, spec, p, 64, uint64(i+1))
			drafted += res.Stats.Drafted
			accepted += res.Stats.Accepted
			if mode == "greedy" {
				want := generate(t, greedy, p, 64, 1)
				if !slices.Equal(res.Sequences[0].Tokens, want.Sequences[0].Tokens) {
					t.Errorf("%q: speculative greedy %q, greedy %q", p, res.Sequences[0].Text, want.Sequences[0].Text)
				}
			}
		}
		rate := float64(accepted) / float64(max(drafted, 1))
		t.Logf("%s speculative decoding, k = 4: %d of %d drafted tokens accepted (%.1f%%)", mode, accepted, drafted, 100*rate)
		if drafted == 0 || rate < 0.2 {
			t.Errorf("%s: acceptance rate %.3f (%d/%d) is too low for a draft of this target", mode, rate, accepted, drafted)
		}
	}
}

// The target writes English: most of what it generates are words of the tokenizer's
// vocabulary that occur in the prompt set's sources, not fragments. This is a coarse guard
// against a broken export, which produces token salad.
func TestEnglish(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a few hundred tokens")
	}
	common := strings.Fields("the and of to that in he is it for be was with his all they unto not shall have this which as are by we our will from")
	for _, src := range []string{greedyPipeline, nucleusPipeline} {
		b := build(t, src)
		for i, p := range prompts {
			text := generate(t, b, p, 80, uint64(i+1)).Sequences[0].Text
			words := strings.Fields(strings.ToLower(text))
			hits := 0
			for _, w := range words {
				if slices.Contains(common, strings.Trim(w, ".,;:!?\"'()")) {
					hits++
				}
			}
			if len(words) < 20 || hits*5 < len(words) {
				t.Errorf("%q: %d words, %d common English words: %q", p, len(words), hits, text)
			}
		}
	}
}

// LOOM_MODELS_SAMPLES=1 go test ./models -run TestPrintSamples -v prints the samples of
// models/README.md.
func TestPrintSamples(t *testing.T) {
	if os.Getenv("LOOM_MODELS_SAMPLES") == "" {
		t.Skip("set LOOM_MODELS_SAMPLES=1 to print sample outputs")
	}
	for _, model := range Names() {
		for _, mode := range []string{"greedy", "T=0.8, top-p 0.95, seed 1"} {
			src := strings.Replace(greedyPipeline, `"default"`, `"`+model+`"`, 1)
			if mode != "greedy" {
				src = strings.Replace(nucleusPipeline, `"default"`, `"`+model+`"`, 1)
			}
			b := build(t, src)
			for _, p := range prompts {
				res := generate(t, b, p, 80, 1)
				fmt.Printf("%s, %s:\n%s%s\n\n", model, mode, p, res.Sequences[0].Text)
			}
		}
	}
}
