package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// TestEchoScoresPrompt checks completions' echo: with max_tokens 0 and logprobs it scores a
// text, every prompt token's log-probability equal to the in-process PromptLogprobs (the first
// null), as evaluation harnesses use it; without logprobs the prompt comes before each choice's
// text, streamed or not; a prompt of token ids echoes their text.
func TestEchoScoresPrompt(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	ctx := context.Background()
	const prompt = "And God saw the light, that it was good"

	b, err := pipeline.LoadAndBuild(examplePath("greedy"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	req := b.Request(prompt)
	req.MaxNewTokens, req.Return = 0, core.ReturnOptions{PromptLogprobs: true, TopLogprobs: 1}
	want, err := core.Generate(ctx, b.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}

	got, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens: openai.Int(0), Echo: openai.Bool(true), Logprobs: openai.Int(1)})
	if err != nil {
		t.Fatal(err)
	}
	ch := got.Choices[0]
	if ch.Text != prompt || ch.FinishReason != "length" || got.Usage.CompletionTokens != 0 || got.Usage.PromptTokens != int64(len(want.PromptTokens)) {
		t.Errorf("scoring: text %q (%s), usage %+v; want the prompt, length, %d prompt tokens and none generated", ch.Text, ch.FinishReason, got.Usage, len(want.PromptTokens))
	}
	var raw struct {
		TokenLogprobs []*float64           `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	}
	if err := json.Unmarshal([]byte(ch.Logprobs.RawJSON()), &raw); err != nil {
		t.Fatal(err)
	}
	lp := ch.Logprobs
	if len(lp.Tokens) != len(want.PromptTokens) || len(raw.TokenLogprobs) != len(lp.Tokens) || len(raw.TopLogprobs) != len(lp.Tokens) {
		t.Fatalf("%d tokens, %d logprobs, %d top lists for a prompt of %d tokens", len(lp.Tokens), len(raw.TokenLogprobs), len(raw.TopLogprobs), len(want.PromptTokens))
	}
	if raw.TokenLogprobs[0] != nil || len(raw.TopLogprobs[0]) != 0 {
		t.Errorf("the first prompt token, which nothing predicts: logprob %v, top %v; want null and {}", raw.TokenLogprobs[0], raw.TopLogprobs[0])
	}
	for i := 1; i < len(lp.Tokens); i++ {
		if lp.Tokens[i] != string(b.Pipeline.Tokenizer.TokenBytes(want.PromptTokens[i])) {
			t.Errorf("token %d %q, want %q", i, lp.Tokens[i], b.Pipeline.Tokenizer.TokenBytes(want.PromptTokens[i]))
		}
		if raw.TokenLogprobs[i] == nil || float32(*raw.TokenLogprobs[i]) != want.PromptLogprobs[i] || len(raw.TopLogprobs[i]) != 1 {
			t.Errorf("token %d: logprob %v (top %v), in process %v", i, raw.TokenLogprobs[i], raw.TopLogprobs[i], want.PromptLogprobs[i])
		}
	}

	// Echo without logprobs, whole and streamed, n = 2.
	gen := direct(t, "default", prompt, pipeline.Overrides{N: ptr(2)}, 9, 12)
	params := openai.CompletionNewParams{Model: "default", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens: openai.Int(12), N: openai.Int(2), Seed: openai.Int(9), Echo: openai.Bool(true)}
	whole, err := c.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	streamed := make([]strings.Builder, 2)
	stream := c.Completions.NewStreaming(ctx, params)
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			streamed[ch.Index].WriteString(ch.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for i, sq := range gen.Sequences {
		if whole.Choices[i].Text != prompt+sq.Text || streamed[i].String() != prompt+sq.Text {
			t.Errorf("choice %d: echoed %q, streamed %q; want %q", i, whole.Choices[i].Text, streamed[i].String(), prompt+sq.Text)
		}
	}

	// A prompt of token ids echoes their text.
	ids := make([]int64, len(want.PromptTokens))
	var text strings.Builder
	for i, id := range want.PromptTokens {
		ids[i] = int64(id)
		text.Write(b.Pipeline.Tokenizer.TokenBytes(id))
	}
	got, err = c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids}, MaxTokens: openai.Int(0), Echo: openai.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != text.String() {
		t.Errorf("token prompt echoed %q, want %q", got.Choices[0].Text, text.String())
	}
}
