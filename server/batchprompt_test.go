package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// TestPromptBatch sends several prompts in one completion request: the choices are each
// prompt's own, in order (choice k answers prompt k / n), equal to each prompt run alone,
// whole or streamed, for sampling with n > 1 and for beam search; a batch of token-id prompts
// scored with echo and logprobs (an evaluation harness's loglikelihood requests) gives each
// prompt's in-process log-probabilities; and malformed batches are refused.
func TestPromptBatch(t *testing.T) {
	s, hs := newServer(t, server.Options{})
	if err := s.Load(examplePath("beam")); err != nil {
		t.Fatal(err)
	}
	c := client(hs)
	ctx := context.Background()
	prompts := []string{"And God said", "The whale", "In the beginning"}

	for _, tc := range []struct {
		model string
		n     int
	}{{"default", 2}, {"beam", 1}} {
		var want []string
		promptTokens := 0
		for _, p := range prompts {
			o := pipeline.Overrides{}
			if tc.n > 1 {
				o.N = ptr(tc.n)
			}
			res := direct(t, tc.model, p, o, 4, 10)
			promptTokens += len(res.PromptTokens)
			for _, sq := range res.Sequences {
				want = append(want, sq.Text)
			}
		}
		params := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(tc.model),
			Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts}, Seed: openai.Int(4), MaxTokens: openai.Int(10)}
		if tc.n > 1 {
			params.N = openai.Int(int64(tc.n))
		}
		got, err := c.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for i, ch := range got.Choices {
			if ch.Index != int64(i) {
				t.Errorf("%s: choice %d has index %d", tc.model, i, ch.Index)
			}
			texts = append(texts, ch.Text)
		}
		if fmt.Sprintf("%q", texts) != fmt.Sprintf("%q", want) || got.Usage.PromptTokens != int64(promptTokens) {
			t.Errorf("%s: a batch of %d prompts gave %q (%d prompt tokens); alone %q (%d)", tc.model, len(prompts), texts, got.Usage.PromptTokens, want, promptTokens)
		}
		streamed := make([]strings.Builder, len(want))
		stream := c.Completions.NewStreaming(ctx, params)
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				if ch.Index < 0 || int(ch.Index) >= len(streamed) {
					t.Fatalf("%s: streamed choice %d of %d", tc.model, ch.Index, len(streamed))
				}
				streamed[ch.Index].WriteString(ch.Text)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if streamed[i].String() != want[i] {
				t.Errorf("%s: streamed choice %d %q, alone %q", tc.model, i, streamed[i].String(), want[i])
			}
		}
	}

	// Echoed and streamed, each choice opens with its own prompt.
	echoed := make([]strings.Builder, 2*len(prompts))
	stream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "default",
		Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts}, N: openai.Int(2), Seed: openai.Int(4), MaxTokens: openai.Int(4), Echo: openai.Bool(true)})
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			echoed[ch.Index].WriteString(ch.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for k := range echoed {
		if !strings.HasPrefix(echoed[k].String(), prompts[k/2]) || len(echoed[k].String()) == len(prompts[k/2]) {
			t.Errorf("echoed choice %d: %q, want prompt %d (%q) and its continuation", k, echoed[k].String(), k/2, prompts[k/2])
		}
	}

	// Loglikelihood requests: token prompts, echo, logprobs, max_tokens 0.
	b, err := pipeline.LoadAndBuild(examplePath("greedy"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var batch [][]int64
	var scores []*core.Result
	for _, p := range prompts {
		req := b.Request(p)
		req.MaxNewTokens, req.Return.PromptLogprobs = 0, true
		res, err := core.Generate(ctx, b.Pipeline, req)
		if err != nil {
			t.Fatal(err)
		}
		scores = append(scores, res)
		ids := make([]int64, len(res.PromptTokens))
		for i, id := range res.PromptTokens {
			ids[i] = int64(id)
		}
		batch = append(batch, ids)
	}
	got, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: batch}, MaxTokens: openai.Int(0), Echo: openai.Bool(true), Logprobs: openai.Int(0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != len(prompts) {
		t.Fatalf("%d choices for %d prompts", len(got.Choices), len(prompts))
	}
	for i, ch := range got.Choices {
		var raw struct {
			TokenLogprobs []*float64 `json:"token_logprobs"`
		}
		if err := json.Unmarshal([]byte(ch.Logprobs.RawJSON()), &raw); err != nil {
			t.Fatal(err)
		}
		want := scores[i].PromptLogprobs
		if len(raw.TokenLogprobs) != len(want) || raw.TokenLogprobs[0] != nil {
			t.Fatalf("prompt %d: %d log-probabilities (the first %v), want %d, the first null", i, len(raw.TokenLogprobs), raw.TokenLogprobs[0], len(want))
		}
		for k := 1; k < len(want); k++ {
			if raw.TokenLogprobs[k] == nil || float32(*raw.TokenLogprobs[k]) != want[k] {
				t.Errorf("prompt %d token %d: %v, in process %v", i, k, raw.TokenLogprobs[k], want[k])
			}
		}
	}

	for _, tc := range []struct {
		name   string
		prompt openai.CompletionNewParamsPromptUnion
		text   string
	}{
		{"too many prompts", openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: make([]string, 65)}, "65 prompts: from 1 to 64"},
		{"an empty token prompt", openai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}, {}}}, "prompt 1: an empty array of token ids"},
		{"a token outside the vocabulary", openai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: [][]int64{{1, 999999}}}, "prompt 0: token 1 = 999999 is outside the vocabulary"},
		{"a prompt longer than the context", openai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}, slices.Repeat([]int64{5}, 600)}}, "prompt 1 of the batch: prompt does not fit the model's context window: 600 prompt tokens"},
	} {
		_, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy", Prompt: tc.prompt})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "prompt" || !strings.Contains(apiErr.Message, tc.text) {
			t.Errorf("%s: %v, want a 400 on prompt saying %q", tc.name, err, tc.text)
		}
	}
}

// TestBatchWithPluginStrategy: a plugin strategy that forks more sequences than it returns
// (the nbest example samples 8 and returns the best 2) answers a batch of prompts with each
// prompt's choices numbered prompt × n + k, as each prompt alone answers them; streamed, a
// batch cannot number such sequences, and the stream ends with an error saying so.
func TestBatchWithPluginStrategy(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "nbest")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/plugins/nbest").CombinedOutput(); err != nil {
		t.Fatalf("building the nbest example: %v\n%s", err, out)
	}
	sum, err := plugins.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../examples/plugins/nbest/pipeline.toml")
	if err != nil {
		t.Fatal(err)
	}
	toml := regexp.MustCompile(`(?m)^sha256 = .*$`).ReplaceAllLiteralString(string(src), `sha256 = "`+sum+`"`)
	toml = regexp.MustCompile(`(?m)^path = .*$`).ReplaceAllLiteralString(toml, "path = "+strconv.Quote(bin))
	path := filepath.Join(dir, "nbest.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Options{StartPlugins: plugins.Starter(plugins.Options{})})
	t.Cleanup(func() { s.Close() })
	if err := s.Load(path); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c := client(hs)
	ctx := context.Background()
	prompts := []string{"And God said", "In the beginning"}
	batch, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "nbest", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts}, MaxTokens: openai.Int(6), Seed: openai.Int(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Choices) != 4 {
		t.Fatalf("%d choices for two prompts with n = 2", len(batch.Choices))
	}
	for p, prompt := range prompts {
		alone, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "nbest", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(6), Seed: openai.Int(2)})
		if err != nil {
			t.Fatal(err)
		}
		for k, ch := range alone.Choices {
			got := batch.Choices[p*2+k]
			if got.Index != int64(p*2+k) || got.Text != ch.Text {
				t.Errorf("prompt %d choice %d: index %d %q, alone %q", p, k, got.Index, got.Text, ch.Text)
			}
		}
	}
	stream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "nbest", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts}, MaxTokens: openai.Int(6), Seed: openai.Int(2)})
	for stream.Next() {
		if ch := stream.Current().Choices; len(ch) > 0 && ch[0].Index >= 4 {
			t.Errorf("streamed choice index %d of a batch of 2 × 2", ch[0].Index)
		}
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), `stream: strategy best_of gave a prompt more than the 2 sequences`) || !strings.Contains(err.Error(), `"param":"stream"`) {
		t.Errorf("streamed batch: %v; want an error naming the strategy", err)
	}
}
