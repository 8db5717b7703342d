package server_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// TestBestOf checks completions' best_of: best_of samples from the seed, the n with the
// highest mean log-probability per token returned best first, as ranking the same run in
// process gives; and its errors.
func TestBestOf(t *testing.T) {
	s, hs := newServer(t, server.Options{})
	if err := s.Load(examplePath("beam")); err != nil {
		t.Fatal(err)
	}
	c := client(hs)
	ctx := context.Background()
	const prompt = "And God said"

	b, err := pipeline.LoadAndBuild(examplePath("default"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	req := b.Request(prompt)
	req.N, req.MaxNewTokens, req.Seed, req.Return.Logprobs = 4, 10, core.SeedOf(13), true
	run, err := core.Generate(ctx, b.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}
	mean := func(sq core.SequenceResult) float64 {
		var s float64
		for _, v := range sq.Logprobs {
			s += float64(v)
		}
		return s / float64(len(sq.Logprobs))
	}
	ranked := slices.Clone(run.Sequences)
	slices.SortStableFunc(ranked, func(a, b core.SequenceResult) int {
		switch ma, mb := mean(a), mean(b); {
		case ma > mb:
			return -1
		case ma < mb:
			return 1
		}
		return 0
	})
	if mean(ranked[0]) == mean(ranked[len(ranked)-1]) {
		t.Fatal("the four samples rank level: the test would show nothing")
	}

	for _, n := range []int{1, 2} {
		got, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "default",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
			N:      openai.Int(int64(n)), BestOf: openai.Int(4), Seed: openai.Int(13), MaxTokens: openai.Int(10)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Choices) != n {
			t.Fatalf("best_of 4, n %d: %d choices", n, len(got.Choices))
		}
		tokens := 0
		for i, ch := range got.Choices {
			if ch.Text != ranked[i].Text || ch.Index != int64(i) || ch.Logprobs.JSON.Tokens.Valid() {
				t.Errorf("best_of 4, n %d, choice %d (index %d): %q, logprobs %v; want %q (mean %.3f) and no logprobs", n, i, ch.Index, ch.Text, ch.Logprobs.Tokens, ranked[i].Text, mean(ranked[i]))
			}
			tokens += len(ranked[i].Tokens)
		}
		if got.Usage.CompletionTokens != int64(tokens) {
			t.Errorf("usage counts %d completion tokens, the returned choices have %d", got.Usage.CompletionTokens, tokens)
		}
	}

	for _, tc := range []struct {
		name   string
		params openai.CompletionNewParams
	}{
		{"below n", openai.CompletionNewParams{N: openai.Int(3), BestOf: openai.Int(2)}},
		{"above the most choices", openai.CompletionNewParams{BestOf: openai.Int(17)}},
	} {
		tc.params.Model, tc.params.Prompt = "default", openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}
		_, err := c.Completions.New(ctx, tc.params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "best_of" {
			t.Errorf("%s: %v, want a 400 naming best_of", tc.name, err)
		}
	}
	// beam search returns at most num_beams (4): best_of above it is refused on best_of, at
	// once, and n above it on n
	for _, tc := range []struct {
		param  string
		params openai.CompletionNewParams
	}{
		{"best_of", openai.CompletionNewParams{N: openai.Int(2), BestOf: openai.Int(8)}},
		{"n", openai.CompletionNewParams{N: openai.Int(5)}},
	} {
		tc.params.Model, tc.params.Prompt = "beam", openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}
		_, err := c.Completions.New(ctx, tc.params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tc.param || !strings.Contains(apiErr.Message, "num_beams = 4") {
			t.Errorf("beam, %s above num_beams: %v, want a 400 naming %s", tc.param, err, tc.param)
		}
	}
	stream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "default",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, BestOf: openai.Int(3)})
	for stream.Next() {
	}
	var apiErr *openai.Error
	if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "best_of" {
		t.Errorf("streamed best_of: %v, want a 400 naming best_of", err)
	}
}
