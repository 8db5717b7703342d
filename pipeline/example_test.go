package pipeline_test

import (
	"context"
	"fmt"
	"log"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/testmodel"
)

// A program that already holds a model (loaded its own way, or implemented in Go) builds a
// pipeline around it with Options.Model and Options.Tokenizer; the file then needs no
// [model] table.
func ExampleBuild_withModel() {
	model, tok := testmodel.Default() // any core.Model and core.Tokenizer
	spec, err := pipeline.Parse("greedy.toml", []byte(`
[generation]
max_new_tokens = 4
ignore_eos = true

[strategy]
type = "greedy"
`))
	if err != nil {
		log.Fatal(err)
	}
	built, err := pipeline.Build(spec, pipeline.Options{Model: model, Tokenizer: tok})
	if err != nil {
		log.Fatal(err)
	}
	defer built.Close()
	res, err := core.Generate(context.Background(), built.Pipeline, built.Request("the cat"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d tokens, finish %s\n", len(res.Sequences[0].Tokens), res.Sequences[0].FinishReason)
	// Output: 4 tokens, finish length
}

// A speculative pipeline given its draft model by the program: the file needs no
// [draft_model] table either.
func ExampleBuild_withDraftModel() {
	model, tok := testmodel.Default()
	draft, draftTok := testmodel.Default() // a smaller model with the same tokenizer, in practice
	spec, err := pipeline.Parse("speculative.toml", []byte(`
[generation]
max_new_tokens = 4
ignore_eos = true

[strategy]
type = "speculative"
k = 2
greedy = true
`))
	if err != nil {
		log.Fatal(err)
	}
	built, err := pipeline.Build(spec, pipeline.Options{Model: model, Tokenizer: tok, DraftModel: draft, DraftTokenizer: draftTok})
	if err != nil {
		log.Fatal(err)
	}
	defer built.Close()
	res, err := core.Generate(context.Background(), built.Pipeline, built.Request("the cat"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d tokens, finish %s, %d drafted\n", len(res.Sequences[0].Tokens), res.Sequences[0].FinishReason, res.Stats.Drafted)
	// Output: 4 tokens, finish length, 2 drafted
}
