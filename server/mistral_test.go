package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
)

// mistralToolCalls is the id of the [TOOL_CALLS] control token in mistralVocab.
const mistralToolCalls = 4094

// mistralVocab is the embedded vocabulary with its last merged token become Mistral's
// [TOOL_CALLS] control token.
func mistralVocab(t *testing.T) map[string]any {
	return controlVocab(t, map[int]string{mistralToolCalls: "[TOOL_CALLS]"})
}

// mistralModel writes the embedded model with Mistral Nemo's chat template and mistralVocab,
// its context stretched to hold the template's prompts; it returns the pipeline, named
// mistral, and the [TOOL_CALLS] token's id.
func mistralModel(t *testing.T) (string, int64) {
	t.Helper()
	set := mistralVocab(t)
	set["llama.context_length"] = uint32(2048)
	return withTemplateFrom(t, "../models/default.gguf", "mistral", chatTemplates(t)["mistral-nemo"], set), mistralToolCalls
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
	s, hs := serve(t, path)
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
	// Prose that spells the marker with ordinary tokens (the control token banned) opens no
	// call: the lazy constraint waits for the token itself. Scripted by a regex.
	spelled := fmt.Sprintf("[model]\npath = %q\n[strategy]\ntype = \"greedy\"\n[[processors]]\ntype = \"regex\"\npattern = '''It means calls: \\[TOOL_CALLS\\] comes first\\.'''\n", filepath.Join(filepath.Dir(path), "m.gguf"))
	res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "mistral", Messages: user, MaxTokens: openai.Int(60), Tools: toolParams()},
		option.WithJSONSet("pipeline", spelled), option.WithJSONSet("logit_bias", map[string]int{strconv.FormatInt(toolCalls, 10): -100}))
	if err != nil || res.Choices[0].Message.Content != "It means calls: [TOOL_CALLS] comes first." || len(res.Choices[0].Message.ToolCalls) != 0 {
		t.Errorf("the marker spelled in prose: %+v, %v", res, err)
	}

	// A speculative pipeline whose draft model has no template reads the token as the target
	// does (the two tokenizers must agree), and holds its calls the same way.
	draftVocab := mistralVocab(t)
	draftVocab["llama.context_length"] = uint32(2048)
	draft := filepath.Join(filepath.Dir(withTemplateFrom(t, "../models/draft.gguf", "draft", "", draftVocab)), "m.gguf")
	spec := filepath.Join(filepath.Dir(path), "speculative.toml")
	os.WriteFile(spec, []byte(fmt.Sprintf("[model]\npath = \"m.gguf\"\n[draft_model]\npath = %q\n[strategy]\ntype = \"speculative\"\nk = 2\n", draft)), 0o644)
	if err := s.Load(spec); err != nil {
		t.Fatalf("a draft model beside a target whose tokenizer writes [TOOL_CALLS]: %v", err)
	}
	sres, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "speculative", Messages: user, MaxTokens: openai.Int(300), Tools: toolParams(),
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, ParallelToolCalls: openai.Bool(false)})
	if err != nil || len(sres.Choices[0].Message.ToolCalls) != 1 {
		t.Errorf("speculative, required: %+v, %v", sres, err)
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
