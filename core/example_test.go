package core_test

import (
	"context"
	"fmt"
	"math"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

// A pipeline assembled in code: the test model, one processor written as a function, greedy
// decoding.
func ExampleGenerate() {
	model, tok := testmodel.Default()
	banThe := core.ProcessorFunc(func(_ *core.Sequence, c *core.Candidates) error {
		ids, _ := tok.Encode("the", core.EncodeOptions{})
		c.Dense()[ids[0]] = -1e30
		return nil
	})
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: strategies.Greedy{}, Processors: []core.LogitsProcessor{banThe}}
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "the cat", MaxNewTokens: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	s := res.Sequences[0]
	fmt.Printf("%q %s %d\n", s.Text, s.FinishReason, len(s.Tokens))
	// Output: " under and slowly to saw garden under very" length 8
}

// Stream yields tokens as they are chosen.
func ExampleStream() {
	model, tok := testmodel.Default()
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: strategies.Ancestral{}}
	for ev, err := range core.Stream(context.Background(), p, core.Request{Prompt: "the dog", MaxNewTokens: 5, Seed: core.SeedOf(1)}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%q ", ev.Text)
	}
	fmt.Println()
	// Output: " moon" " new" " came" " came" " new"
}

// With Return.Logprobs each event carries the tokens whose text it completes, with their
// log-probabilities: printed as they stream, they are the Result's tokens in order.
func ExampleStream_logprobs() {
	model, tok := testmodel.Default()
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: strategies.Greedy{}}
	req := core.Request{Prompt: "the dog", MaxNewTokens: 3, Return: core.ReturnOptions{Logprobs: true}}
	for ev, err := range core.Stream(context.Background(), p, req) {
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, e := range ev.Logprobs {
			fmt.Printf("%q %.2f\n", tok.TokenBytes(e.Token), e.Logprob)
		}
	}
	// Output:
	// " played" -0.72
	// " night" -0.04
	// " small" -0.01
}

// Return.PromptLogprobs scores a text under the model: each token's log-probability given the
// tokens before it (the first has none), from which the text's perplexity follows. Nothing
// needs to be generated.
func ExampleReturnOptions_promptLogprobs() {
	model, tok := testmodel.Default()
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: strategies.Greedy{}}
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "the dog ran", MaxNewTokens: 0,
		Return: core.ReturnOptions{PromptLogprobs: true}})
	if err != nil {
		panic(err)
	}
	var sum float64
	for i, id := range res.PromptTokens[1:] {
		lp := res.PromptLogprobs[i+1]
		sum += float64(lp)
		fmt.Printf("%q %.2f\n", tok.TokenBytes(id), lp)
	}
	fmt.Printf("perplexity %.0f\n", math.Exp(-sum/float64(len(res.PromptTokens)-1)))
	// Output:
	// " the" -6.12
	// " dog" -7.98
	// " ran" -8.89
	// perplexity 2128
}

// A program that must know a prompt's length before it runs the request (to admit it by the
// KV cache it may fill, say) encodes it once and hands the tokens on.
func ExampleEncodePrompt() {
	model, tok := testmodel.Default()
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: strategies.Greedy{}}
	req := core.Request{Prompt: "And God said", MaxNewTokens: 4}
	toks, err := core.EncodePrompt(p, &req)
	if err != nil {
		panic(err)
	}
	req.PromptTokens = toks // the session takes these instead of encoding the prompt again
	res, err := core.Generate(context.Background(), p, req)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(toks) == len(res.PromptTokens), res.GeneratedTokens)
	// Output: true 4
}
