package core_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

func pipelineWith(strategy core.Strategy, procs ...core.LogitsProcessor) *core.Pipeline {
	m, tok := testmodel.Default()
	return &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategy, Processors: procs}
}

func TestGreedyIsArgmaxOfModel(t *testing.T) {
	p := pipelineWith(strategies.Greedy{})
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "the cat", MaxNewTokens: 12, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	// Recompute greedy by hand from the model's table.
	m := p.Model.(*testmodel.Model)
	ctx := slices.Clone(res.PromptTokens)
	row := make([]float32, m.Config().VocabSize)
	for i, got := range res.Sequences[0].Tokens {
		m.Row(row, ctx)
		want := core.TokenID(0)
		for id, v := range row {
			if v > row[want] {
				want = core.TokenID(id)
			}
		}
		if got != want {
			t.Fatalf("step %d: greedy chose %d, argmax is %d", i, got, want)
		}
		ctx = append(ctx, got)
	}
	if res.Sequences[0].FinishReason != core.FinishLength || len(res.Sequences[0].Tokens) != 12 {
		t.Fatalf("finish %q after %d tokens, want length after 12", res.Sequences[0].FinishReason, len(res.Sequences[0].Tokens))
	}
}

func TestSameSeedSameOutputDifferentSeedDiffers(t *testing.T) {
	p := pipelineWith(strategies.Ancestral{})
	run := func(seed uint64) []core.TokenID {
		res, err := core.Generate(context.Background(), p, core.Request{Prompt: "the dog", MaxNewTokens: 30, Seed: core.SeedOf(seed), IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Seed != seed {
			t.Fatalf("result seed %d, want %d", res.Seed, seed)
		}
		return res.Sequences[0].Tokens
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different outputs:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatalf("seeds 7 and 8 gave the same 30 tokens: %v", a)
	}
}

func TestRandomSeedIsReportedAndReplays(t *testing.T) {
	p := pipelineWith(strategies.Ancestral{})
	first, err := core.Generate(context.Background(), p, core.Request{Prompt: "the", MaxNewTokens: 20, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	again, err := core.Generate(context.Background(), p, core.Request{Prompt: "the", MaxNewTokens: 20, IgnoreEOS: true, Seed: core.SeedOf(first.Seed)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first.Sequences[0].Tokens, again.Sequences[0].Tokens) {
		t.Fatal("replaying the reported seed gave a different output")
	}
}

func TestSampleDoesNotDependOnBatch(t *testing.T) {
	p := pipelineWith(strategies.Ancestral{})
	m := p.Model.(*testmodel.Model)
	run := func(n int) *core.Result {
		res, err := core.Generate(context.Background(), p, core.Request{Prompt: "she saw", MaxNewTokens: 25, N: n, Seed: core.SeedOf(3), IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Sequences) != n {
			t.Fatalf("%d sequences, want %d", len(res.Sequences), n)
		}
		return res
	}
	before := m.Tokens()
	three := run(3)
	prefillTokens := int64(len(three.PromptTokens))
	if ran := m.Tokens() - before; ran != prefillTokens+3*25-3 {
		t.Errorf("n=3 ran %d token positions, want one shared prefill (%d) + 3×24 decode steps", ran, prefillTokens)
	}
	four := run(4)
	one := run(1)
	for i := 0; i < 3; i++ {
		if !slices.Equal(three.Sequences[i].Tokens, four.Sequences[i].Tokens) {
			t.Errorf("sample %d differs between n=3 and n=4", i)
		}
	}
	if !slices.Equal(one.Sequences[0].Tokens, three.Sequences[0].Tokens) {
		t.Error("sample 0 differs between n=1 and n=3")
	}
	if slices.Equal(three.Sequences[0].Tokens, three.Sequences[1].Tokens) {
		t.Error("samples 0 and 1 are identical: streams are not independent")
	}
}

func TestStreamingEventsMatchResult(t *testing.T) {
	p := pipelineWith(strategies.Ancestral{})
	var texts [2]strings.Builder
	var toks [2][]core.TokenID
	finished := 0
	res, err := core.Generate(context.Background(), p, core.Request{
		Prompt: "the sun", MaxNewTokens: 15, N: 2, Seed: core.SeedOf(11),
		OnEvent: func(ev core.Event) error {
			texts[ev.Sequence].WriteString(ev.Text)
			toks[ev.Sequence] = append(toks[ev.Sequence], ev.Token)
			if ev.Finished {
				finished++
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if finished != 2 {
		t.Errorf("%d finished events, want 2", finished)
	}
	for i, s := range res.Sequences {
		if texts[i].String() != s.Text {
			t.Errorf("sequence %d: streamed %q, result %q", i, texts[i].String(), s.Text)
		}
		if !slices.Equal(toks[i], s.Tokens) {
			t.Errorf("sequence %d: streamed tokens %v, result %v", i, toks[i], s.Tokens)
		}
	}
}

func TestStreamIterator(t *testing.T) {
	p := pipelineWith(strategies.Greedy{})
	var n int
	for ev, err := range core.Stream(context.Background(), p, core.Request{Prompt: "the", MaxNewTokens: 10, IgnoreEOS: true}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 4 {
			break // cancels the request
		}
		_ = ev
	}
	if n != 4 {
		t.Fatalf("got %d events before break, want 4", n)
	}
}

func TestCancellationKeepsPartialOutput(t *testing.T) {
	p := pipelineWith(strategies.Ancestral{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := 0
	res, err := core.Generate(ctx, p, core.Request{Prompt: "the", MaxNewTokens: 100, Seed: core.SeedOf(1), IgnoreEOS: true,
		OnEvent: func(core.Event) error {
			count++
			if count == 5 {
				cancel()
			}
			return nil
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res == nil || len(res.Sequences) != 1 {
		t.Fatalf("no partial result: %+v", res)
	}
	s := res.Sequences[0]
	if len(s.Tokens) != 5 || s.FinishReason != core.FinishCancelled {
		t.Fatalf("partial result has %d tokens, reason %q; want 5, cancelled", len(s.Tokens), s.FinishReason)
	}
}

func TestEdgeCases(t *testing.T) {
	banAll := core.ProcessorFunc(func(_ *core.Sequence, c *core.Candidates) error {
		for i := range c.Dense() {
			c.Dense()[i] = float32(math.Inf(-1))
		}
		return nil
	})
	nan := core.ProcessorFunc(func(_ *core.Sequence, c *core.Candidates) error {
		c.Dense()[5] = float32(math.NaN())
		return nil
	})
	posInf := core.ProcessorFunc(func(_ *core.Sequence, c *core.Candidates) error {
		c.Dense()[5] = float32(math.Inf(1))
		return nil
	})
	cases := []struct {
		name     string
		strategy core.Strategy
		procs    []core.LogitsProcessor
		req      core.Request
		wantErr  error
		check    func(*testing.T, *core.Result)
	}{
		{name: "empty prompt", strategy: strategies.Greedy{}, req: core.Request{Prompt: "", NoSpecial: true, MaxNewTokens: 5}, wantErr: core.ErrEmptyPrompt},
		{name: "empty text still has BOS", strategy: strategies.Greedy{}, req: core.Request{Prompt: "", MaxNewTokens: 3, IgnoreEOS: true},
			check: func(t *testing.T, r *core.Result) {
				if len(r.Sequences[0].Tokens) != 3 {
					t.Errorf("got %d tokens, want 3", len(r.Sequences[0].Tokens))
				}
			}},
		{name: "zero max tokens", strategy: strategies.Ancestral{}, req: core.Request{Prompt: "the", MaxNewTokens: 0, N: 2},
			check: func(t *testing.T, r *core.Result) {
				for _, s := range r.Sequences {
					if len(s.Tokens) != 0 || s.FinishReason != core.FinishLength {
						t.Errorf("got %d tokens reason %q, want none, length", len(s.Tokens), s.FinishReason)
					}
				}
			}},
		{name: "all banned, sampling", strategy: strategies.Ancestral{}, procs: []core.LogitsProcessor{banAll}, req: core.Request{Prompt: "the", MaxNewTokens: 3}, wantErr: core.ErrNoCandidates},
		{name: "all banned, greedy", strategy: strategies.Greedy{}, procs: []core.LogitsProcessor{banAll}, req: core.Request{Prompt: "the", MaxNewTokens: 3}, wantErr: core.ErrNoCandidates},
		{name: "NaN logit", strategy: strategies.Ancestral{}, procs: []core.LogitsProcessor{nan}, req: core.Request{Prompt: "the", MaxNewTokens: 3}, wantErr: core.ErrInvalidLogits},
		{name: "NaN logit, greedy", strategy: strategies.Greedy{}, procs: []core.LogitsProcessor{nan}, req: core.Request{Prompt: "the", MaxNewTokens: 3}, wantErr: core.ErrInvalidLogits},
		{name: "+Inf logit", strategy: strategies.Ancestral{}, procs: []core.LogitsProcessor{posInf}, req: core.Request{Prompt: "the", MaxNewTokens: 3}, wantErr: core.ErrInvalidLogits},
		{name: "prompt token outside vocabulary", strategy: strategies.Greedy{}, req: core.Request{PromptTokens: []core.TokenID{1, 9999}, MaxNewTokens: 3}, wantErr: errAny},
		{name: "negative n", strategy: strategies.Greedy{}, req: core.Request{Prompt: "the", N: -1}, wantErr: errAny},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := core.Generate(context.Background(), pipelineWith(c.strategy, c.procs...), c.req)
			switch {
			case c.wantErr == errAny && err == nil:
				t.Fatal("no error")
			case c.wantErr != nil && c.wantErr != errAny && !errors.Is(err, c.wantErr):
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			case c.wantErr == nil && err != nil:
				t.Fatal(err)
			}
			if c.check != nil {
				c.check(t, res)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestLogprobsAndTopLogprobs(t *testing.T) {
	p := pipelineWith(strategies.Greedy{})
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "the cat", MaxNewTokens: 5, IgnoreEOS: true,
		Return: core.ReturnOptions{Logprobs: true, TopLogprobs: 3}})
	if err != nil {
		t.Fatal(err)
	}
	m := p.Model.(*testmodel.Model)
	s := res.Sequences[0]
	ctx := slices.Clone(res.PromptTokens)
	row := make([]float32, m.Config().VocabSize)
	for i, id := range s.Tokens {
		m.Row(row, ctx)
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v))
		}
		want := float64(row[id]) - math.Log(z)
		if math.Abs(float64(s.Logprobs[i])-want) > 1e-4 || math.Abs(float64(s.Scores[i])-want) > 1e-4 {
			t.Errorf("step %d: logprob %v score %v, want %v (no processors: both raw)", i, s.Logprobs[i], s.Scores[i], want)
		}
		if len(s.TopLogprobs[i]) != 3 || s.TopLogprobs[i][0].ID != id {
			t.Errorf("step %d: top logprobs %v, want 3 led by the greedy token %d", i, s.TopLogprobs[i], id)
		}
		ctx = append(ctx, id)
	}
}

func TestTraceRecordsEveryProcessor(t *testing.T) {
	keep3 := core.ProcessorFunc(func(_ *core.Sequence, c *core.Candidates) error {
		c.Sort()
		c.SetItems(c.Items()[:3], true)
		return nil
	})
	p := pipelineWith(strategies.Ancestral{}, keep3)
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "the", MaxNewTokens: 4, Seed: core.SeedOf(2), IgnoreEOS: true,
		Return: core.ReturnOptions{Trace: 5}})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Sequences[0].Trace
	if len(tr) != 4 {
		t.Fatalf("%d trace steps, want 4", len(tr))
	}
	for _, st := range tr {
		if len(st.Stages) != 2 || st.Stages[0].Processor != "model" || st.Stages[1].Processor != "func" {
			t.Fatalf("stages %+v, want model then func", st.Stages)
		}
		if st.Stages[0].Kept != p.Model.Config().VocabSize || st.Stages[1].Kept != 3 || len(st.Stages[1].Top) != 3 {
			t.Errorf("kept %d → %d (top %d), want %d → 3 (top 3)", st.Stages[0].Kept, st.Stages[1].Kept, len(st.Stages[1].Top), p.Model.Config().VocabSize)
		}
		found := false
		for _, tp := range st.Stages[1].Top {
			found = found || tp.ID == st.Chosen
		}
		if !found {
			t.Errorf("chosen token %d is not among the 3 kept", st.Chosen)
		}
	}
}
