package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
)

// reasoningOf reads the reasoning_content a response's message or a chunk's delta carries
// beyond OpenAI's fields ("" when it has none).
func reasoningOf[F interface{ Raw() string }](t *testing.T, extra map[string]F) string {
	t.Helper()
	f, ok := extra["reasoning_content"]
	if !ok || f.Raw() == "" || f.Raw() == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
		t.Fatalf("reasoning_content %s: %v", f.Raw(), err)
	}
	return s
}

// reply is a chat choice as a test compares it: its thinking, content, calls and finish, and
// the response's reasoning tokens and completion tokens.
type reply struct {
	reasoning, content, calls, finish string
	thinkingTokens, tokens            int64
}

// thinkingReply asks for one choice without stream and with it, through the Go SDK, and
// checks that the streamed pieces put together are the response: the same reasoning_content,
// content, calls and finish reason, and the same usage.
func thinkingReply(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) reply {
	t.Helper()
	var thinking strings.Builder
	sawAnswer := false
	res, acc := wholeAndStreamed(t, c, params, func(chunk openai.ChatCompletionChunk) {
		for _, ch := range chunk.Choices {
			r := reasoningOf(t, ch.Delta.JSON.ExtraFields)
			if r != "" && sawAnswer {
				t.Errorf("reasoning %q streamed after the answer began", r)
			}
			sawAnswer = sawAnswer || ch.Delta.Content != "" || len(ch.Delta.ToolCalls) > 0
			thinking.WriteString(r)
		}
	}, opts...)
	m := res.Choices[0].Message
	want := reply{reasoning: reasoningOf(t, m.JSON.ExtraFields), content: m.Content, finish: res.Choices[0].FinishReason,
		thinkingTokens: res.Usage.CompletionTokensDetails.ReasoningTokens, tokens: res.Usage.CompletionTokens}
	for _, tc := range m.ToolCalls {
		want.calls += tc.Function.Name + tc.Function.Arguments
	}
	g := acc.Choices[0]
	got := reply{reasoning: thinking.String(), content: g.Message.Content, finish: g.FinishReason,
		thinkingTokens: acc.Usage.CompletionTokensDetails.ReasoningTokens, tokens: acc.Usage.CompletionTokens}
	for _, tc := range g.Message.ToolCalls {
		got.calls += tc.Function.Name + tc.Function.Arguments
	}
	if got != want {
		t.Errorf("streamed %+v\nresponse %+v", got, want)
	}
	return want
}

// thinkingModel writes the embedded model with Qwen3's chat template (its context stretched
// to hold the template's prompts) and returns its pipeline, named qwen3; the model file is
// m.gguf beside it.
func thinkingModel(t *testing.T) string {
	t.Helper()
	return withTemplateFrom(t, "../models/default.gguf", "qwen3", chatTemplates(t)["qwen3"], map[string]any{"llama.context_length": uint32(2048)})
}

// chatTemplates reads the real models' chat templates of ../chat/testdata/templates.json by
// name.
func chatTemplates(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../chat/testdata/templates.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixtures []struct{ Name, Template string }
	if err := json.Unmarshal(b, &fixtures); err != nil {
		t.Fatal(err)
	}
	src := map[string]string{}
	for _, f := range fixtures {
		src[f.Name] = f.Template
	}
	return src
}

// TestReasoningModels serves the embedded model with the chat templates of Qwen3 (a reply
// may open <think>) and of DeepSeek R1 with its generation prompt opening the block (as its
// later versions do), scripting replies with a regex in an inline pipeline: the thinking comes
// back as reasoning_content and the content without it, streamed and not; tool calls are read
// from the answer only, a lazy tool constraint ignores calls written while thinking, and a
// required one leaves the thinking free and holds the answer to a call.
func TestReasoningModels(t *testing.T) {
	src := chatTemplates(t)
	// The generation prompts of DeepSeek R1's later versions and of Qwen3's thinking models
	// (2507) open the block: the reply begins inside it.
	opened := func(name, prompt, open string) string {
		if !strings.Contains(src[name], prompt) {
			t.Fatalf("%s's template no longer holds %s", name, prompt)
		}
		return strings.Replace(src[name], prompt, open, 1)
	}
	templates := map[string]string{
		"qwen3":          src["qwen3"],
		"qwen3-thinking": opened("qwen3", `{{- '<|im_start|>assistant\n' }}`, `{{- '<|im_start|>assistant\n<think>\n' }}`),
		"deepseek-r1":    opened("deepseek-r1", `{{'<｜Assistant｜>'}}{% endif %}`, `{{'<｜Assistant｜><think>\n'}}{% endif %}`),
	}
	gguf := map[string]string{}
	paths := []string{examplePath("default")} // no template: the plain one
	for name, tpl := range templates {
		path := withTemplateFrom(t, "../models/default.gguf", name, tpl, map[string]any{"llama.context_length": uint32(2048)})
		paths = append(paths, path)
		gguf[name] = filepath.Join(filepath.Dir(path), "m.gguf")
	}
	_, hs := serve(t, paths...)
	c := client(hs)
	valid := validators(t)
	script := func(model, re string) option.RequestOption {
		return option.WithJSONSet("pipeline", fmt.Sprintf("[model]\npath = %q\n[strategy]\ntype = \"greedy\"\n[[processors]]\ntype = \"regex\"\npattern = '''%s'''\n", gguf[model], re))
	}
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")}
	const call = `<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Oslo"\}\}\n</tool_call>`
	cases := []struct {
		name, model, re string
		user            string // the user's message, when not user's
		tools           bool
		choice          string // tool_choice
		extra           []option.RequestOption
		want            reply
	}{
		// A user quoting the open tag does not open a block.
		{name: "a user writes <think>", model: "qwen3", user: "What does the <think> tag mean?", re: `It means thinking\.`,
			want: reply{content: "It means thinking.", finish: "stop"}},
		// reasoning_format none leaves the block in the content, and the constraints still
		// leave it free: the calls are read from the answer after it.
		{name: "none: required call after thinking", model: "qwen3", re: `<think>\nThe weather tool\.\n</think>\n\n(.|\n)*`, tools: true, choice: "required",
			extra: []option.RequestOption{option.WithJSONSet("reasoning_format", "none")},
			want:  reply{content: "<think>\nThe weather tool.\n</think>", calls: "valid", finish: "tool_calls"}},
		{name: "none: a call written while thinking is not one", model: "qwen3", re: `<think>\n` + call + `\n</think>\n\nIt rains\.`, tools: true,
			extra: []option.RequestOption{option.WithJSONSet("reasoning_format", "none")},
			want:  reply{content: "<think>\n" + strings.NewReplacer(`\n`, "\n", `\{`, "{", `\}`, "}").Replace(call) + "\n</think>\n\nIt rains.", finish: "stop"}},
		{name: "thinks, then answers", model: "qwen3", re: `<think>\nThe user asks about Oslo\.\n</think>\n\nIt rains in Oslo\.`,
			want: reply{reasoning: "The user asks about Oslo.", content: "It rains in Oslo.", finish: "stop"}},
		{name: "reasoning_format none", model: "qwen3", re: `<think>\nHm\.\n</think>\n\nIt rains\.`, extra: []option.RequestOption{option.WithJSONSet("reasoning_format", "none")},
			want: reply{content: "<think>\nHm.\n</think>\n\nIt rains.", finish: "stop"}},
		{name: "does not think", model: "qwen3", re: `It rains\.`, want: reply{content: "It rains.", finish: "stop"}},
		{name: "prompt opened the block", model: "deepseek-r1", re: `The user asks\.\n</think>\n\nIt rains\.`,
			want: reply{reasoning: "The user asks.", content: "It rains.", finish: "stop"}},
		{name: "cut while thinking", model: "deepseek-r1", re: `Thinking on and on and on(.|\n)*`, extra: []option.RequestOption{option.WithJSONSet("max_tokens", 6)},
			want: reply{reasoning: "?", finish: "length"}},
		{name: "a call after thinking", model: "qwen3", re: `<think>\nThe weather tool\.\n</think>\n\n` + call, tools: true,
			want: reply{reasoning: "The weather tool.", calls: `get_weather{"city": "Oslo"}`, finish: "tool_calls"}},
		// The call written while thinking would hold the rest of the reply if the lazy
		// constraint looked for calls there: "No" cannot follow it.
		{name: "a call written while thinking is not one", model: "qwen3", re: `<think>\n` + call + `\nNo, wait\.\n</think>\n\nIt rains\.`, tools: true,
			want: reply{reasoning: strings.NewReplacer(`\n`, "\n", `\{`, "{", `\}`, "}").Replace(call) + "\nNo, wait.", content: "It rains.", finish: "stop"}},
		// The regex frees the answer: the required constraint alone makes it a valid call.
		{name: "required: thinking free, answer a call", model: "qwen3", re: `<think>\nThe weather tool\.\n</think>\n\n(.|\n)*`, tools: true, choice: "required",
			want: reply{reasoning: "The weather tool.", calls: "valid", finish: "tool_calls"}},
		{name: "required, the prompt opened the block", model: "qwen3-thinking", re: `Oslo\.\n</think>(.|\n)*`, tools: true, choice: "required",
			want: reply{reasoning: "Oslo.", calls: "valid", finish: "tool_calls"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: tc.model, Messages: user, MaxTokens: openai.Int(200)}
			if tc.user != "" {
				params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(tc.user)}
			}
			if tc.tools {
				params.Tools = toolParams()
				params.ParallelToolCalls = openai.Bool(false)
				if tc.choice != "" {
					params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String(tc.choice)}
				}
			}
			got := thinkingReply(t, c, params, append([]option.RequestOption{script(tc.model, tc.re)}, tc.extra...)...)
			// Every token of a reply that thinks is a thinking token up to the block's end.
			switch {
			case got.reasoning == "" && !strings.Contains(got.content, "<think>") && got.thinkingTokens != 0:
				t.Errorf("no thinking, %d thinking tokens", got.thinkingTokens)
			case got.reasoning != "" && tc.want.finish == "length" && got.thinkingTokens != got.tokens:
				t.Errorf("cut while thinking: %d of %d tokens thinking", got.thinkingTokens, got.tokens)
			case got.reasoning != "" && tc.want.finish != "length" && (got.thinkingTokens < 3 || got.thinkingTokens >= got.tokens):
				t.Errorf("%d of %d tokens thinking", got.thinkingTokens, got.tokens)
			}
			got.thinkingTokens, got.tokens = 0, 0
			if tc.want.reasoning == "?" && strings.HasPrefix(got.reasoning, "Thinking") {
				got.reasoning = "?"
			}
			if tc.want.calls == "valid" {
				// the blanks the model may write before its calls (at most four bytes)
				got.content = strings.TrimRight(got.content, "\n")
				// one call of either tool, its arguments valid against its schema
				name, args, _ := strings.Cut(got.calls, "{")
				doc, err := santhosh.UnmarshalJSON(strings.NewReader("{" + args))
				if v := valid[name]; v != nil && err == nil && v.Validate(doc) == nil {
					got.calls = "valid"
				}
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}

	// response_format leaves the thinking free too and holds the answer: the regex frees it.
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 12}}, "required": []string{"city"}, "additionalProperties": false}
	got := thinkingReply(t, c, openai.ChatCompletionNewParams{Model: "qwen3", Messages: user, MaxTokens: openai.Int(200),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "place", Schema: schema}}}},
		script("qwen3", `<think>\nA JSON object\.\n</think>\n\n(.|\n)*`))
	got.thinkingTokens, got.tokens = 0, 0
	var place struct{ City string }
	dec := json.NewDecoder(strings.NewReader(got.content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&place); err != nil || got.reasoning != "A JSON object." || len(place.City) > 12 {
		t.Errorf("response_format after thinking: %+v (%v)", got, err)
	}

	// enable_thinking false: Qwen3's template closes an empty block in the prompt.
	tokens := func(kwargs bool) int64 {
		var opts []option.RequestOption
		if kwargs {
			opts = append(opts, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
		}
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "qwen3", Messages: user, MaxTokens: openai.Int(1)}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return res.Usage.PromptTokens
	}
	if with, without := tokens(true), tokens(false); with <= without {
		t.Errorf("enable_thinking false: %d prompt tokens, %d without: the template's empty block is missing", with, without)
	}

	// An assistant turn's reasoning_content is taken back (Qwen3 shows it after the last
	// user message).
	post := func(body string) (int, string) {
		resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	history := `"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4", "reasoning_content": "Two and two."}, {"role": "user", "content": "3+3?"}]`
	if code, body := post(`{"model": "qwen3", "max_tokens": 1, ` + history + `}`); code != 200 {
		t.Errorf("reasoning_content in history: %d %s", code, body)
	}
	for _, e := range []struct{ body, param, msg string }{
		{`{"model": "qwen3", "max_tokens": 1, "reasoning_format": "xml", ` + history + `}`, "reasoning_format", `"xml": must be auto, deepseek`},
		{`{"model": "qwen3", "max_tokens": 1, "chat_template_kwargs": {"messages": []}, ` + history + `}`, "chat_template_kwargs.messages", "is set by the server"},
		{`{"model": "default", "max_tokens": 1, "chat_template_kwargs": {"enable_thinking": false}, "messages": [{"role": "user", "content": "hi"}]}`, "chat_template_kwargs", "has no chat template"},
		{`{"model": "qwen3", "max_tokens": 1, "messages": [{"role": "user", "content": "hi", "reasoning_content": "x"}]}`, "messages[0].reasoning_content", "only an assistant message"},
	} {
		code, body := post(e.body)
		var out struct {
			Error struct{ Param, Message string }
		}
		_ = json.Unmarshal([]byte(body), &out)
		if code != 400 || out.Error.Param != e.param || !strings.Contains(out.Error.Message, e.msg) {
			t.Errorf("%s: %d %s", e.body, code, body)
		}
	}
}
