package core_test

import (
	"context"
	"fmt"

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
