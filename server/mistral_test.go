package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	santhosh "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/loomlm/loom/model/gguf"
	"github.com/loomlm/loom/server"
)

// mistralModel writes the embedded model with Mistral Nemo's chat template and a vocabulary
// whose last merged token became Mistral's [TOOL_CALLS] control token (its merge dropped, so
// that no text makes it), its context stretched to hold the template's prompts; it returns
// the pipeline, named mistral, and the token's id.
func mistralModel(t *testing.T) (string, int64) {
	t.Helper()
	const toolCalls = 4094
	src, err := gguf.Open("../models/default.gguf")
	if err != nil {
		t.Fatal(err)
	}
	pieces, _ := src.Value("tokenizer.ggml.tokens")
	types, _ := src.Value("tokenizer.ggml.token_type")
	merges, _ := src.Value("tokenizer.ggml.merges")
	p, ty := slices.Clone(pieces.([]string)), slices.Clone(types.([]int32))
	p[toolCalls], ty[toolCalls] = "[TOOL_CALLS]", 3 // control
	m := merges.([]string)
	src.Close()
	return withTemplateFrom(t, "../models/default.gguf", "mistral", chatTemplates(t)["mistral-nemo"], map[string]any{
		"llama.context_length":      uint32(2048),
		"tokenizer.ggml.tokens":     p,
		"tokenizer.ggml.token_type": ty,
		"tokenizer.ggml.merges":     m[:len(m)-1],
	}), toolCalls
}

// TestMistralToolCalls: a model whose template is Mistral's calls tools after its
// [TOOL_CALLS] control token, which writes no text in the model's vocabulary: the server reads
// the token as its text, so that tool_choice required holds the reply to [TOOL_CALLS] and an
// array of calls (the control token itself where the model writes it), auto holds the calls a
// reply opens with the token (the test makes the model write it with logit_bias: without the
// lazy constraint's trigger on it, the calls would not be valid), the calls come back with
// ids of nine letters and digits, streamed as without stream, and the conversation that sends
// them back with the tool's result renders (Mistral's template refuses other ids).
func TestMistralToolCalls(t *testing.T) {
	path, toolCalls := mistralModel(t)
	s := server.New(server.Options{})
	t.Cleanup(func() { s.Close() })
	if err := s.Load(path); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c := client(hs)
	valid := validators(t)
	bias := option.WithJSONSet("logit_bias", map[string]int{strconv.FormatInt(toolCalls, 10): 100})
	id := regexp.MustCompile(`^[A-Za-z0-9]{9}$`)
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")}
	// /detokenize writes the token as its text too.
	resp, err := http.Post(hs.URL+"/detokenize", "application/json", strings.NewReader(`{"model": "mistral", "tokens": [`+strconv.FormatInt(toolCalls, 10)+`, 58]}`))
	if err != nil {
		t.Fatal(err)
	}
	var text struct{ Prompt string }
	json.NewDecoder(resp.Body).Decode(&text)
	resp.Body.Close()
	if !strings.HasPrefix(text.Prompt, "[TOOL_CALLS]") {
		t.Errorf("detokenize: %q", text.Prompt)
	}
	for _, tc := range []struct {
		name   string
		choice string
		opts   []option.RequestOption
	}{
		{"required", "required", nil},
		{"required, the token written", "required", []option.RequestOption{bias}},
		{"auto, the token written", "auto", []option.RequestOption{bias}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "mistral", Messages: user, MaxTokens: openai.Int(300), Tools: toolParams(),
				ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String(tc.choice)}, ParallelToolCalls: openai.Bool(false),
				Logprobs: openai.Bool(true)}
			res := streamMatchesResponse(t, c, params, tc.opts...)
			ch := res.Choices[0]
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("finish %s, message %+v", ch.FinishReason, ch.Message)
			}
			call := ch.Message.ToolCalls[0]
			doc, err := santhosh.UnmarshalJSON(strings.NewReader(call.Function.Arguments))
			if v := valid[call.Function.Name]; v == nil || err != nil || v.Validate(doc) != nil || !id.MatchString(call.ID) {
				t.Errorf("call %+v (%v)", call, err)
			}
			if len(tc.opts) > 0 && (len(ch.Logprobs.Content) == 0 || ch.Logprobs.Content[0].Token != "[TOOL_CALLS]") {
				t.Errorf("the reply does not begin with the control token: %+v", ch.Logprobs.Content[:min(2, len(ch.Logprobs.Content))])
			}
			// The conversation goes on with the call and its result.
			next := append(slices.Clone(user), ch.Message.ToParam(), openai.ToolMessage("rain, 4 °C", call.ID))
			if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "mistral", Messages: next, MaxTokens: openai.Int(4), Tools: toolParams()}); err != nil {
				t.Errorf("the conversation with the call sent back: %v", err)
			}
		})
	}
}
