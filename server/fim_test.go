package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestFillInTheMiddle: a completion request with suffix, to a model whose GGUF names
// fill-in-the-middle tokens (the embedded model given three of its tokens as markers, under
// the current keys and the older ones, or with no keys and the markers' texts in its
// vocabulary), runs the prompt llama.cpp's server writes — BOS, the prefix marker and the
// prompt, the suffix marker and the suffix, the middle marker — as the same request with those
// token ids as its prompt shows, streamed and not; a prefix of token ids that begins with BOS
// does not double it, and a model that adds no BOS gets none; a model without the tokens
// refuses a suffix with a 400 naming it, and takes an empty one as no suffix.
func TestFillInTheMiddle(t *testing.T) {
	const pre, suf, mid = 4092, 4093, 4094
	paths := []string{examplePath("greedy")}
	for name, keys := range map[string]map[string]any{
		// the three last merged tokens become Qwen2.5-Coder's markers, found by their texts
		"coder-text": controlVocab(t, map[int]string{pre: "<|fim_prefix|>", suf: "<|fim_suffix|>", mid: "<|fim_middle|>"}),
		"coder-nobos": {"tokenizer.ggml.fim_pre_token_id": uint32(pre), "tokenizer.ggml.fim_suf_token_id": uint32(suf), "tokenizer.ggml.fim_mid_token_id": uint32(mid),
			"tokenizer.ggml.add_bos_token": false, "tokenizer.ggml.add_eos_token": true},
		"coder":     {"tokenizer.ggml.fim_pre_token_id": uint32(pre), "tokenizer.ggml.fim_suf_token_id": uint32(suf), "tokenizer.ggml.fim_mid_token_id": uint32(mid)},
		"coder-old": {"tokenizer.ggml.prefix_token_id": uint32(pre), "tokenizer.ggml.suffix_token_id": uint32(suf), "tokenizer.ggml.middle_token_id": uint32(mid)},
		"coder-bad": {"tokenizer.ggml.fim_pre_token_id": uint32(99999), "tokenizer.ggml.fim_suf_token_id": uint32(suf), "tokenizer.ggml.fim_mid_token_id": uint32(mid)},
	} {
		paths = append(paths, withTemplateFrom(t, "../models/default.gguf", name, "", keys))
	}
	_, hs := serve(t, paths...)
	c := client(hs)
	ctx := context.Background()
	tokenizeWith := func(model, text string, special bool) []int64 {
		resp, err := http.Post(hs.URL+"/tokenize", "application/json", strings.NewReader(`{"model": "`+model+`", "prompt": `+jsonString(text)+`, "add_special_tokens": `+map[bool]string{true: "true", false: "false"}[special]+`}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Tokens []int64 }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out.Tokens
	}
	tokenize := func(text string, special bool) []int64 { return tokenizeWith("coder", text, special) }
	prefix, suffix := "And God said, Let there be", " and there was light."
	ids := append(tokenize("", true), pre) // BOS, as the model adds it
	ids = append(append(ids, tokenize(prefix, false)...), suf)
	ids = append(append(ids, tokenize(suffix, false)...), mid)
	explicit, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "coder", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids}, MaxTokens: openai.Int(8), Seed: openai.Int(3), Temperature: openai.Float(1)})
	if err != nil {
		t.Fatal(err)
	}
	// coder-text's vocabulary tokenizes the prefix and suffix otherwise (three merges fewer).
	textIDs := append(tokenizeWith("coder-text", "", true), pre)
	textIDs = append(append(textIDs, tokenizeWith("coder-text", prefix, false)...), suf)
	textIDs = append(append(textIDs, tokenizeWith("coder-text", suffix, false)...), mid)
	explicitText, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "coder-text", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: textIDs}, MaxTokens: openai.Int(8), Seed: openai.Int(3), Temperature: openai.Float(1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"coder", "coder-old", "coder-text"} {
		params := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(model), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prefix)}, Suffix: openai.String(suffix), MaxTokens: openai.Int(8), Seed: openai.Int(3), Temperature: openai.Float(1)}
		res, err := c.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		want, wantIDs := explicit, ids
		if model == "coder-text" {
			want, wantIDs = explicitText, textIDs
		}
		if res.Choices[0].Text != want.Choices[0].Text || res.Usage.PromptTokens != int64(len(wantIDs)) {
			t.Errorf("%s: %q (%d prompt tokens); the marked-up prompt %v gives %q", model, res.Choices[0].Text, res.Usage.PromptTokens, wantIDs, want.Choices[0].Text)
		}
		stream := c.Completions.NewStreaming(ctx, params)
		var text strings.Builder
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				text.WriteString(ch.Text)
			}
		}
		if err := stream.Err(); err != nil || text.String() != res.Choices[0].Text {
			t.Errorf("%s streamed %q (%v), whole %q", model, text.String(), err, res.Choices[0].Text)
		}
	}

	// The same prefix as token ids, BOS first as /tokenize gives them: the BOS is not doubled.
	withIDs, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "coder", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: tokenize(prefix, true)}, Suffix: openai.String(suffix), MaxTokens: openai.Int(8), Seed: openai.Int(3), Temperature: openai.Float(1)})
	if err != nil || withIDs.Choices[0].Text != explicit.Choices[0].Text || withIDs.Usage.PromptTokens != int64(len(ids)) {
		t.Errorf("a prefix of token ids: %+v, %v", withIDs, err)
	}
	// A model that adds EOS and not BOS (the same id here) gets no BOS.
	noBOS, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "coder-nobos", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prefix)}, Suffix: openai.String(suffix), MaxTokens: openai.Int(1)})
	if err != nil || noBOS.Usage.PromptTokens != int64(len(ids)-1) {
		t.Errorf("without BOS: %+v, %v", noBOS, err)
	}

	if _, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}, Suffix: openai.String(""), MaxTokens: openai.Int(2)}); err != nil {
		t.Errorf("an empty suffix to a model without fill-in-the-middle tokens: %v", err)
	}
	for _, e := range []struct{ model, suffix, param, msg string }{
		{"greedy", "x", "suffix", `has no fill-in-the-middle tokens (its GGUF names no tokenizer.ggml.fim_pre_token_id, and its vocabulary has none of ["<|fim_prefix|>"`},
		{"coder-bad", "x", "suffix", "tokenizer.ggml.fim_pre_token_id = 99999 is not a token of its vocabulary (4096 tokens)"},
	} {
		_, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(e.model), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}, Suffix: openai.String(e.suffix), MaxTokens: openai.Int(2)})
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Param != e.param || !strings.Contains(ae.Message, e.msg) {
			t.Errorf("%s, suffix %q: %v", e.model, e.suffix, err)
		}
	}
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"model": "coder", "prompt": "x", "suffix": "y", "echo": true, "max_tokens": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"param":"echo"`) {
		t.Errorf("echo with suffix: %d %s", resp.StatusCode, b)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
