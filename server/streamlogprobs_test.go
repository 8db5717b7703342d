package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// forcedPipeline constrains sampling to a grammar whose output is mostly forced tokens, which
// force_tokens appends with no row: their raw details come only from a later forward.
const forcedPipeline = `[model]
builtin = "default"

[strategy]
type = "sample"
force_tokens = true

[[processors]]
type = "grammar"
grammar = '''
root ::= "{\"verdict\": \"" ("light" | "darkness") "\", \"day\": " [1-7] "}"
'''
`

// TestStreamedLogprobsEqualResponse asks every example pipeline (sampling with n > 1, beam
// search, speculative decoding, prompt lookup, …) and a pipeline of forced tokens for
// logprobs with and without stream: the chunks of each choice together must carry exactly the
// response's tokens, log-probabilities, top tokens and text offsets, each token in the chunk
// with its text or after it. Completions and chat both.
func TestStreamedLogprobsEqualResponse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "pipelines", "*.toml"))
	if err != nil || len(files) < 8 {
		t.Fatalf("example pipelines: %v, %v", files, err)
	}
	forced := filepath.Join(t.TempDir(), "forced.toml")
	if err := os.WriteFile(forced, []byte(forcedPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Options{})
	defer s.Close()
	var names []string
	for _, f := range append(files, forced) {
		if err := s.Load(f); err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".toml"))
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := client(hs)
	ctx := context.Background()
	for _, name := range names {
		n := int64(2)
		if strings.HasPrefix(name, "speculative") || name == "prompt-lookup" {
			n = 1 // one sequence each
		}
		for _, echo := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/completions/echo=%v", name, echo), func(t *testing.T) {
				params := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(name),
					Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God saw the light")},
					Seed:   openai.Int(5), MaxTokens: openai.Int(24), N: openai.Int(n), Logprobs: openai.Int(3), Echo: openai.Bool(echo)}
				want, err := c.Completions.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]openai.CompletionChoice, len(want.Choices))
				texts := make([]strings.Builder, len(want.Choices))
				stream := c.Completions.NewStreaming(ctx, params)
				for stream.Next() {
					for _, ch := range stream.Current().Choices {
						if ch.Index < 0 || int(ch.Index) >= len(got) {
							t.Fatalf("chunk of choice %d; the response has %d", ch.Index, len(got))
						}
						g := &got[ch.Index]
						texts[ch.Index].WriteString(ch.Text)
						lp := ch.Logprobs
						g.Logprobs.Tokens = append(g.Logprobs.Tokens, lp.Tokens...)
						g.Logprobs.TokenLogprobs = append(g.Logprobs.TokenLogprobs, lp.TokenLogprobs...)
						g.Logprobs.TopLogprobs = append(g.Logprobs.TopLogprobs, lp.TopLogprobs...)
						g.Logprobs.TextOffset = append(g.Logprobs.TextOffset, lp.TextOffset...)
						if tokens := strings.Join(g.Logprobs.Tokens, ""); !strings.HasPrefix(texts[ch.Index].String(), tokens) && ch.FinishReason == "" {
							t.Errorf("choice %d: a chunk's tokens %q run ahead of the text streamed, %q", ch.Index, tokens, texts[ch.Index].String())
						}
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				for i, w := range want.Choices {
					if texts[i].String() != w.Text {
						t.Errorf("choice %d: streamed %q, response %q", i, texts[i].String(), w.Text)
					}
					if len(w.Logprobs.Tokens) == 0 || len(w.Logprobs.TopLogprobs) != len(w.Logprobs.Tokens) {
						t.Fatalf("choice %d: response logprobs %+v", i, w.Logprobs)
					}
					g, wl := got[i].Logprobs, w.Logprobs
					for _, d := range []struct {
						what      string
						got, want any
					}{{"tokens", g.Tokens, wl.Tokens}, {"token_logprobs", g.TokenLogprobs, wl.TokenLogprobs},
						{"top_logprobs", g.TopLogprobs, wl.TopLogprobs}, {"text_offset", g.TextOffset, wl.TextOffset}} {
						if !reflect.DeepEqual(d.got, d.want) {
							t.Errorf("choice %d %s: streamed %v, response %v", i, d.what, d.got, d.want)
						}
					}
					if echo && !strings.HasPrefix(w.Text, "And God saw the light") {
						t.Errorf("choice %d: echo gave %q", i, w.Text)
					}
				}
			})
		}
		t.Run(name+"/chat", func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: name,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who made light?")},
				Seed:     openai.Int(6), MaxCompletionTokens: openai.Int(24), N: openai.Int(n),
				Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2)}
			want, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			got := make([][]openai.ChatCompletionTokenLogprob, len(want.Choices))
			texts := make([]strings.Builder, len(want.Choices))
			stream := c.Chat.Completions.NewStreaming(ctx, params)
			for stream.Next() {
				for _, ch := range stream.Current().Choices {
					if ch.Index < 0 || int(ch.Index) >= len(got) {
						t.Fatalf("chunk of choice %d; the response has %d", ch.Index, len(got))
					}
					texts[ch.Index].WriteString(ch.Delta.Content)
					for _, e := range ch.Logprobs.Content {
						tops := make([]openai.ChatCompletionTokenLogprobTopLogprob, len(e.TopLogprobs))
						for k, tp := range e.TopLogprobs {
							tops[k] = openai.ChatCompletionTokenLogprobTopLogprob{Token: tp.Token, Logprob: tp.Logprob, Bytes: tp.Bytes}
						}
						got[ch.Index] = append(got[ch.Index], openai.ChatCompletionTokenLogprob{Token: e.Token, Logprob: e.Logprob, Bytes: e.Bytes, TopLogprobs: tops})
					}
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			for i, w := range want.Choices {
				if texts[i].String() != w.Message.Content {
					t.Errorf("choice %d: streamed %q, response %q", i, texts[i].String(), w.Message.Content)
				}
				content := w.Logprobs.Content
				if len(content) == 0 || len(got[i]) != len(content) {
					t.Fatalf("choice %d: streamed %d tokens' logprobs, response %d", i, len(got[i]), len(content))
				}
				for k := range content {
					wk, gk := content[k], got[i][k]
					same := wk.Token == gk.Token && wk.Logprob == gk.Logprob && fmt.Sprint(wk.Bytes) == fmt.Sprint(gk.Bytes) && len(wk.TopLogprobs) == len(gk.TopLogprobs)
					for j := 0; same && j < len(wk.TopLogprobs); j++ {
						same = wk.TopLogprobs[j].Token == gk.TopLogprobs[j].Token && wk.TopLogprobs[j].Logprob == gk.TopLogprobs[j].Logprob
					}
					if !same {
						t.Errorf("choice %d token %d: streamed %q %v (top %d), response %q %v (top %d)", i, k, gk.Token, gk.Logprob, len(gk.TopLogprobs), wk.Token, wk.Logprob, len(wk.TopLogprobs))
					}
				}
			}
		})
	}
}
