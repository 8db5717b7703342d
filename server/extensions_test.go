package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestExtensionFields checks the sampling fields vLLM and llama-server accept beyond OpenAI's
// (min_p, typical_p, repetition_penalty, min_tokens, ignore_eos): each request gives what the
// same request gives with the pipeline written out by hand, the processor where the
// documentation puts it; and out-of-range values are refused naming the field.
func TestExtensionFields(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	ctx := context.Background()
	const head = "[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"sample\"\n[[stopping]]\ntype = \"stop_strings\"\nstrings = [\"\\n\\n\"]\n"
	temperature := "[[processors]]\ntype = \"temperature\"\nt = 0.8\n"
	topP := "[[processors]]\ntype = \"top_p\"\np = 0.95\n"
	for _, tc := range []struct {
		field string
		value any
		chain string // the processors, in order, as TOML
	}{
		{"min_p", 0.3, temperature + topP + "[[processors]]\ntype = \"min_p\"\np = 0.3\n"},
		{"typical_p", 0.5, temperature + topP + "[[processors]]\ntype = \"typical_p\"\np = 0.5\n"},
		{"repetition_penalty", 1.8, "[[processors]]\ntype = \"repetition_penalty\"\npenalty = 1.8\n" + temperature + topP},
		{"min_tokens", 30, "[[processors]]\ntype = \"min_new_tokens\"\nn = 30\n" + temperature + topP},
	} {
		ask := func(opts ...option.RequestOption) string {
			t.Helper()
			res, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "default",
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")},
				Seed:   openai.Int(8), MaxTokens: openai.Int(32)}, opts...)
			if err != nil {
				t.Fatalf("%s: %v", tc.field, err)
			}
			return res.Choices[0].Text
		}
		got := ask(option.WithJSONSet(tc.field, tc.value))
		toml := head + tc.chain
		want := ask(option.WithJSONSet("pipeline", toml))
		plain := ask()
		if got != want {
			t.Errorf("%s = %v: %q; the pipeline written out: %q", tc.field, tc.value, got, want)
		}
		if got == plain {
			t.Errorf("%s = %v changed nothing (%q): the test shows nothing", tc.field, tc.value, got)
		}
	}

	// ignore_eos: generation runs to max_tokens past the end-of-generation token, as in process.
	b, err := pipeline.LoadAndBuild(examplePath("greedy"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	req := b.Request("And God said")
	req.MaxNewTokens, req.IgnoreEOS = 200, true
	want, err := core.Generate(ctx, b.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")}, MaxTokens: openai.Int(200)},
		option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Text != want.Sequences[0].Text || res.Usage.CompletionTokens != 200 {
		t.Errorf("ignore_eos: %d tokens %q; in process %q", res.Usage.CompletionTokens, res.Choices[0].Text, want.Sequences[0].Text)
	}

	// stop_token_ids: stops at the first of them, as a stop_tokens criterion written out does.
	stopAt := want.Sequences[0].Tokens[6]
	first := 6
	for k, id := range want.Sequences[0].Tokens {
		if id == stopAt {
			first = k
			break
		}
	}
	stopped, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")}, MaxTokens: openai.Int(200)},
		option.WithJSONSet("ignore_eos", true), option.WithJSONSet("stop_token_ids", []int{int(stopAt)}))
	if err != nil {
		t.Fatal(err)
	}
	written, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")}, MaxTokens: openai.Int(200)},
		option.WithJSONSet("ignore_eos", true), option.WithJSONSet("pipeline", fmt.Sprintf("[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"greedy\"\n[[stopping]]\ntype = \"stop_tokens\"\nids = [%d]\n", stopAt)))
	if err != nil {
		t.Fatal(err)
	}
	if stopped.Choices[0].FinishReason != "stop" || stopped.Usage.CompletionTokens != int64(first+1) || stopped.Choices[0].Text != written.Choices[0].Text {
		t.Errorf("stop_token_ids [%d]: %d tokens %q (%s); want %d tokens, as written out: %q", stopAt, stopped.Usage.CompletionTokens, stopped.Choices[0].Text, stopped.Choices[0].FinishReason, first+1, written.Choices[0].Text)
	}

	for _, tc := range []struct {
		field string
		value any
		text  string
	}{
		{"stop_token_ids", []int{1, 1 << 30}, "stop_token_ids: id 1 = 1073741824 is outside the vocabulary"},
		{"min_p", 1.5, "min_p: 1.5 is outside [0, 1]"},
		{"typical_p", 0, "typical_p: 0 is outside (0, 1]"},
		{"repetition_penalty", 0, "repetition_penalty: 0 is outside (0, 10]"},
		{"min_tokens", -1, "min_tokens: -1 must not be negative"},
	} {
		_, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "default",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}}, option.WithJSONSet(tc.field, tc.value))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tc.field || !strings.Contains(apiErr.Message, tc.text) {
			t.Errorf("%s = %v: %v, want a 400 saying %q", tc.field, tc.value, err, tc.text)
		}
	}
}
