package processors_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/processors"
)

// buildTOML builds a pipeline on the embedded test model with the given processor tables.
func buildTOML(t *testing.T, procs string) (*pipeline.Built, error) {
	t.Helper()
	src := "[model]\nbuiltin = \"test\"\n\n[generation]\nmax_new_tokens = 8\nseed = 3\n\n" + procs
	spec, err := pipeline.Parse("p.toml", []byte(src))
	if err != nil {
		return nil, err
	}
	return pipeline.Build(spec, pipeline.Options{})
}

// Every built-in processor builds from a pipeline file, with its defaults, and generates.
func TestEveryProcessorBuildsFromTOML(t *testing.T) {
	all := `
[[processors]]
type = "logit_bias"
bias = { "5" = 1.5, "6" = "-inf" }

[[processors]]
type = "bad_words"
words = ["big dog"]
ids = [[7], [8, 9]]

[[processors]]
type = "no_repeat_ngram"
n = 2

[[processors]]
type = "min_new_tokens"
n = 3

[[processors]]
type = "penalties"
repeat = 1.1
frequency = 0.1
presence = 0.1

[[processors]]
type = "repetition_penalty"
penalty = 1.2
last_n = 16

[[processors]]
type = "frequency_penalty"
penalty = 0.3
scope = "generated"

[[processors]]
type = "presence_penalty"
penalty = 0.2

[[processors]]
type = "temperature"

[[processors]]
type = "top_k"

[[processors]]
type = "top_p"

[[processors]]
type = "min_p"

[[processors]]
type = "typical_p"
p = 0.99
`
	b, err := buildTOML(t, all)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var names []string
	for _, p := range b.Pipeline.Processors {
		names = append(names, p.Name())
	}
	want := "logit_bias bad_words no_repeat_ngram min_new_tokens penalties repetition_penalty frequency_penalty presence_penalty temperature top_k top_p min_p typical_p"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("processors %s\nwant %s", got, want)
	}
	res, err := core.Generate(context.Background(), b.Pipeline, b.Request("the cat sat"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Sequences[0].Tokens); n < 3 {
		t.Fatalf("min_new_tokens = 3, yet %d tokens", n)
	}
	for _, id := range res.Sequences[0].Tokens {
		if id == 6 || id == 7 {
			t.Fatalf("banned token %d generated", id)
		}
	}
	// Every part documents itself and each parameter.
	for _, p := range pipeline.Builtins().Parts(pipeline.Processor) {
		if p.Doc == "" {
			t.Errorf("%s has no doc", p.Type)
		}
		for _, prm := range p.Params {
			if prm.Doc == "" {
				t.Errorf("%s.%s has no doc", p.Type, prm.Name)
			}
		}
	}
}

// Defaults come from the parameter descriptions.
func TestDefaultsFromParams(t *testing.T) {
	part, ok := pipeline.Builtins().Lookup(pipeline.Processor, "top_p")
	if !ok {
		t.Fatal("top_p is not registered")
	}
	pDefault, _ := part.Param("p")
	built, err := part.NewProcessor(pipeline.NewArgs(part, nil, map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := processors.NewTopP(pDefault.Default.(float64), 1)
	if fmt.Sprint(built) != fmt.Sprint(want) {
		t.Fatalf("top_p built with defaults %v, want %v", built, want)
	}
}

func TestProcessorErrorsNameLineAndField(t *testing.T) {
	cases := []struct {
		procs string
		want  string
	}{
		{"[[processors]]\ntype = \"top_p\"\np = 1.5\n", "p.toml:10: processors[0].p = 1.5: must be in [0, 1] (1 disables, 0 keeps the most likely token)"},
		{"[[processors]]\ntype = \"temperature\"\nt = -1\n", "p.toml:10: processors[0].t = -1: must be in [1e-30, 3.4028235e+38] (float32 range; 0 means greedy)"},
		{"[[processors]]\ntype = \"top_k\"\nk = -2\n", "p.toml:10: processors[0].k = -2: must be ≥ 0 (0 disables)"},
		{"[[processors]]\ntype = \"top_k\"\nk = 2.5\n", "p.toml:10: processors[0].k = 2.5: must be an int"},
		{"[[processors]]\ntype = \"min_p\"\nmin_keep = 0\n", "p.toml:10: processors[0].min_keep = 0: must be ≥ 1"},
		{"[[processors]]\ntype = \"penalties\"\nscope = \"prompt\"\n", `p.toml:10: processors[0].scope = "prompt": must be "all" or "generated"`},
		{"[[processors]]\ntype = \"penalties\"\nrepeat = 0\n", "p.toml:10: processors[0].repeat = 0: must be in [1.1754944e-38, 3.4028235e+38] (float32 range; 1 disables)"},
		{"[[processors]]\ntype = \"frequency_penalty\"\n", "p.toml:8: processors[0].penalty: missing"},
		{"[[processors]]\ntype = \"logit_bias\"\nbias = { \"5\" = 1, \"99999\" = \"-inf\" }\n", "p.toml:10: processors[0].bias.99999: token id 99999 is outside the vocabulary [0, 59)"},
		{"[[processors]]\ntype = \"bad_words\"\nids = [[1], [3, 70]]\n", "p.toml:10: processors[0].ids[1][1] = 70: outside the vocabulary [0, 59)"},
		{"[[processors]]\ntype = \"bad_words\"\n", "p.toml:8: processors[0].words: nothing to ban"},
		{"[[processors]]\ntype = \"bad_words\"\nwords = [\"ok\", \"\"]\n", `p.toml:10: processors[0].words[1] = "": encodes to no tokens`},
		{"[[processors]]\ntype = \"no_repeat_ngram\"\nn = 0\n", "p.toml:10: processors[0].n = 0: must be ≥ 1"},
	}
	for _, c := range cases {
		_, err := buildTOML(t, c.procs)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s…", c.procs, err, c.want)
		}
	}
}
