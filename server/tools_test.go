package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomlm/loom/chat"
	"github.com/loomlm/loom/server"
	"github.com/loomlm/loom/toolcall"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
)

// toolSchemas are the parameters of the tools the tests declare: required and optional
// keys, enums, bounded numbers and strings, a nested object, an array and a $ref.
var toolSchemas = map[string]map[string]any{
	"get_weather": {
		"type": "object",
		"properties": map[string]any{
			"city": map[string]any{"type": "string", "maxLength": 24},
			"unit": map[string]any{"enum": []any{"C", "F"}},
			"days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7},
		},
		"required":             []any{"city"},
		"additionalProperties": false,
	},
	"book": {
		"type":  "object",
		"$defs": map[string]any{"t": map[string]any{"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}},
		"properties": map[string]any{
			"at":    map[string]any{"$ref": "#/$defs/t"},
			"party": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 1, "maximum": 12}}, "required": []any{"n"}, "additionalProperties": false},
			"seats": map[string]any{"type": "array", "items": map[string]any{"enum": []any{"window", "quiet"}}, "maxItems": 2},
		},
		"required":             []any{"at", "party"},
		"additionalProperties": false,
	},
}

func toolParams() []openai.ChatCompletionToolUnionParam {
	var tools []openai.ChatCompletionToolUnionParam
	for _, name := range []string{"get_weather", "book"} {
		tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Parameters: toolSchemas[name]}))
	}
	return tools
}

// validators compiles each tool's schema with an independent JSON Schema library.
func validators(t *testing.T) map[string]*santhosh.Schema {
	t.Helper()
	out := map[string]*santhosh.Schema{}
	for name, schema := range toolSchemas {
		comp := santhosh.NewCompiler()
		if err := comp.AddResource(name+".json", schema); err != nil {
			t.Fatal(err)
		}
		v, err := comp.Compile(name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		out[name] = v
	}
	return out
}

// TestToolCallsHoldToTheSchemas: with tool_choice required (or one function named), every
// choice of every seed is a call of a declared tool (of that one) whose arguments an
// independent validator accepts against the tool's schema, finish_reason tool_calls, no
// content.
func TestToolCallsHoldToTheSchemas(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	valid := validators(t)
	choices := []openai.ChatCompletionToolChoiceOptionUnionParam{
		{OfAuto: openai.String("required")},
		openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "book"}),
	}
	calls := 0
	for ci, choice := range choices {
		for seed := int64(1); seed <= 8; seed++ {
			res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:             "creative",
				Messages:          []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Book for two at eight.")},
				MaxTokens:         openai.Int(300),
				Seed:              openai.Int(seed),
				N:                 openai.Int(2),
				Tools:             toolParams(),
				ToolChoice:        choice,
				ParallelToolCalls: openai.Bool(false),
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range res.Choices {
				m := ch.Message
				if ch.FinishReason != "tool_calls" || len(m.ToolCalls) != 1 || m.Content != "" {
					t.Errorf("choice %d seed %d: finish %s, %d calls, content %q", ci, seed, ch.FinishReason, len(m.ToolCalls), m.Content)
					continue
				}
				tc := m.ToolCalls[0]
				if ci == 1 && tc.Function.Name != "book" {
					t.Errorf("tool_choice book: a call of %s", tc.Function.Name)
				}
				v, ok := valid[tc.Function.Name]
				if !ok || tc.Type != "function" || !strings.HasPrefix(tc.ID, "call_") {
					t.Errorf("seed %d: call %+v", seed, tc)
					continue
				}
				doc, err := santhosh.UnmarshalJSON(strings.NewReader(tc.Function.Arguments))
				if err != nil {
					t.Errorf("seed %d: arguments %q: %v", seed, tc.Function.Arguments, err)
					continue
				}
				if err := v.Validate(doc); err != nil {
					t.Errorf("seed %d: %s(%s): %v", seed, tc.Function.Name, tc.Function.Arguments, err)
				}
				calls++
			}
		}
	}
	if calls != 32 {
		t.Errorf("%d valid calls of 32", calls)
	}
}

// TestToolCallsStreamAsTheyRespond: a streamed request with tools gives, choice by choice,
// the content, tool calls (name and arguments), finish reason and logprobs of the same
// request without stream, for each tool_choice, through the Go SDK's accumulator.
func TestToolCallsStreamAsTheyRespond(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	// Pipelines whose regex writes a reply of text then calls, or text that only begins like
	// a call, token by token: what the stream holds back and then sends.
	scripted := func(re string) option.RequestOption {
		return option.WithJSONSet("pipeline", "[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"greedy\"\n[[processors]]\ntype = \"regex\"\npattern = '''"+re+"'''\n")
	}
	for _, tc := range []struct {
		name     string
		choice   openai.ChatCompletionToolChoiceOptionUnionParam
		parallel bool
		max      int64
		opts     []option.RequestOption
		content  string
		calls    int
	}{
		{"auto, text then two calls", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}, true, 200,
			[]option.RequestOption{scripted(`Let me look it up\.\n \n<tool_call>\n\{"name": "get_weather", "arguments": \{"city":"Oslo"\}\}\n</tool_call>\n<tool_call>\n\{"name": "book", "arguments": \{"at":"20:00","party":\{"n":2\}\}\}\n</tool_call>`)},
			"Let me look it up.", 2},
		{"auto, a call the model writes once the reply opens one", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}, false, 200,
			[]option.RequestOption{scripted(`Let me look\.\n<tool_call>(.|\n)*`)},
			"Let me look.", 1},
		{"auto, text that only looks like a call", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}, true, 200,
			[]option.RequestOption{scripted(`See <tool_ca and <tool_cal\{"name": "nope"\} </tool_call> then\n\n`)},
			"See <tool_ca and <tool_cal{\"name\": \"nope\"} </tool_call> then\n\n", 0},
		{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, false, 300, nil, "", 0},
		{"required, parallel, cut by max_tokens", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, true, 30, nil, "", 0},
		{"function", openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}), false, 300, nil, "", 0},
		{"auto", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}, true, 40, nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{
				Model:             "creative",
				Messages:          []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Nantucket?")},
				MaxTokens:         openai.Int(tc.max),
				Seed:              openai.Int(11),
				N:                 openai.Int(2),
				Tools:             toolParams(),
				ToolChoice:        tc.choice,
				ParallelToolCalls: openai.Bool(tc.parallel),
				Logprobs:          openai.Bool(true),
			}
			want := streamMatchesResponse(t, c, params, tc.opts...)
			for i, w := range want.Choices {
				if tc.opts != nil && (w.Message.Content != tc.content || len(w.Message.ToolCalls) != tc.calls) {
					t.Errorf("choice %d: content %q and %d calls, want %q and %d", i, w.Message.Content, len(w.Message.ToolCalls), tc.content, tc.calls)
				}
				if tc.name == "required" && w.FinishReason != "tool_calls" || tc.name == "required, parallel, cut by max_tokens" && w.FinishReason != "length" {
					t.Errorf("choice %d finished %s: %q (prompt %d tokens, %d generated)", i, w.FinishReason, w.Message.Content, want.Usage.PromptTokens, want.Usage.CompletionTokens)
				}
			}
		})
	}
}

// wholeAndStreamed runs a chat request without stream, then streamed with its usage (each
// chunk given to onChunk, when set, and put together by the Go SDK's accumulator).
func wholeAndStreamed(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, onChunk func(openai.ChatCompletionChunk), opts ...option.RequestOption) (*openai.ChatCompletion, openai.ChatCompletionAccumulator) {
	t.Helper()
	ctx := context.Background()
	whole, err := c.Chat.Completions.New(ctx, params, opts...)
	if err != nil {
		var ae *openai.Error
		if errors.As(err, &ae) {
			t.Fatal(ae.Message)
		}
		t.Fatal(err)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, params, opts...)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if onChunk != nil {
			onChunk(stream.Current())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return whole, acc
}

// streamMatchesResponse runs a chat request without stream and streamed (put together by the
// Go SDK's accumulator) and checks that each choice has the same content, calls (name and
// arguments), finish reason and number of logprobs both ways; it returns the response.
func streamMatchesResponse(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) *openai.ChatCompletion {
	t.Helper()
	want, acc := wholeAndStreamed(t, c, params, nil, opts...)
	if len(acc.Choices) != len(want.Choices) {
		t.Fatalf("%d streamed choices, %d in the response", len(acc.Choices), len(want.Choices))
	}
	for i, w := range want.Choices {
		g := acc.Choices[i]
		if g.FinishReason != w.FinishReason || g.Message.Content != w.Message.Content || len(g.Message.ToolCalls) != len(w.Message.ToolCalls) {
			t.Errorf("choice %d streamed %s %q %d calls; response %s %q %d calls", i, g.FinishReason, g.Message.Content, len(g.Message.ToolCalls),
				w.FinishReason, w.Message.Content, len(w.Message.ToolCalls))
			continue
		}
		for k := range w.Message.ToolCalls {
			gf, wf := g.Message.ToolCalls[k].Function, w.Message.ToolCalls[k].Function
			if gf.Name != wf.Name || gf.Arguments != wf.Arguments {
				t.Errorf("choice %d call %d streamed %s(%s), response %s(%s)", i, k, gf.Name, gf.Arguments, wf.Name, wf.Arguments)
			}
		}
		if len(g.Logprobs.Content) != len(w.Logprobs.Content) {
			t.Errorf("choice %d: %d streamed logprobs, %d in the response", i, len(g.Logprobs.Content), len(w.Logprobs.Content))
		}
	}
	return want
}

// TestToolConversation: a conversation that called a tool and sends back its result (the
// SDK's own assistant message, content null, then a tool message) is rendered as
// PlainChatPrompt writes it, tools first.
func TestToolConversation(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:             "default",
		Messages:          []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Use the tools."), openai.UserMessage("Weather in Oslo?")},
		MaxTokens:         openai.Int(200),
		Seed:              openai.Int(4),
		Tools:             toolParams(),
		ToolChoice:        openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
		ParallelToolCalls: openai.Bool(false),
	}
	first, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	call := first.Choices[0].Message.ToolCalls
	if len(call) != 1 {
		t.Fatalf("no call: %+v", first.Choices[0].Message)
	}
	params.Messages = append(params.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("rain, 4 °C", call[0].ID))
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}
	params.MaxTokens = openai.Int(8)
	second, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	for _, tool := range toolParams() {
		b, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b)
	}
	tools, err := toolcall.ParseTools(raw)
	if err != nil {
		t.Fatal(err)
	}
	prompt := server.PlainChatPrompt([]chat.Message{
		{Role: "system", Content: "Use the tools."},
		{Role: "user", Content: "Weather in Oslo?"},
		{Role: "assistant", NoContent: true, ToolCalls: []chat.ToolCall{{ID: call[0].ID, Name: call[0].Function.Name, Arguments: call[0].Function.Arguments}}},
		{Role: "tool", Content: "rain, 4 °C", ToolCallID: call[0].ID},
	}, tools)
	if !strings.HasPrefix(prompt, "tools: get_weather(city, days?, unit?), book(at, party, seats?)\n") || !strings.Contains(prompt, "\nassistant: <tool_call>\n{\"name\": \"get_weather\", \"arguments\": "+call[0].Function.Arguments+"}\n</tool_call>\ntool: rain, 4 °C\nassistant:") {
		t.Errorf("plain prompt:\n%s", prompt)
	}
	echo, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "default", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(0)})
	if err != nil {
		t.Fatal(err)
	}
	if second.Usage.PromptTokens != echo.Usage.PromptTokens {
		t.Errorf("the conversation's prompt has %d tokens; PlainChatPrompt's %d", second.Usage.PromptTokens, echo.Usage.PromptTokens)
	}
}

// TestToolCallsWithChatTemplates: a model whose template is Qwen2.5's gets the tools in its
// system prompt as the template writes them and its constrained replies read as calls; one
// whose template is Llama 3.1's, calls in its JSON; one whose template is DeepSeek R1's (calls
// in tokens of its own, which loom does not read) is refused tools it would have to call, and
// shown them with tool_choice none. Mistral's format: TestMistralToolCalls.
func TestToolCallsWithChatTemplates(t *testing.T) {
	templates := chatTemplates(t)
	var paths []string
	llamaGGUF := ""
	for _, name := range []string{"qwen2.5", "llama-3.1", "deepseek-r1"} {
		// the embedded model, its context stretched to hold the templates' tool prompts
		path := withTemplateFrom(t, "../models/default.gguf", name, templates[name], map[string]any{"llama.context_length": uint32(2048)})
		paths = append(paths, path)
		if name == "llama-3.1" {
			llamaGGUF = filepath.Join(filepath.Dir(path), "m.gguf")
		}
	}
	_, hs := serve(t, paths...)
	c := client(hs)
	valid := validators(t)
	for _, model := range []string{"qwen2.5", "llama-3.1"} {
		// streamed too: the whole of a Llama 3 reply is held back, it may be the call
		res := streamMatchesResponse(t, c, openai.ChatCompletionNewParams{
			Model:      model,
			Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")},
			MaxTokens:  openai.Int(300),
			Tools:      toolParams(),
			ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
			// one call: this model, unlike the ones the templates are for, goes on calling
			ParallelToolCalls: openai.Bool(false),
		})
		ch := res.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) == 0 {
			t.Errorf("%s: finish %s, message %+v", model, ch.FinishReason, ch.Message)
			continue
		}
		for _, call := range ch.Message.ToolCalls {
			doc, err := santhosh.UnmarshalJSON(strings.NewReader(call.Function.Arguments))
			if err != nil || call.Function.Name != "get_weather" || valid["get_weather"].Validate(doc) != nil {
				t.Errorf("%s: call %+v (%v)", model, call.Function, err)
			}
		}
	}
	// tool_choice auto with Llama 3's format: a reply that begins with { is held to a call
	// (the lazy constraint at its start) and read as one; a reply in prose stays content.
	// Scripted by a regex over the same model, streamed and not.
	for _, tc := range []struct{ re, content, call string }{
		{`\{"name": "get_weather", "parameters": \{"city": "Oslo"\}\}`, "", `get_weather({"city": "Oslo"})`},
		// the regex frees the arguments: the lazy constraint alone holds them to the schema
		{`\{"name": "get_weather", "parameters": (.|\n)*`, "", "valid"},
		{`It is sunny in Oslo\.`, "It is sunny in Oslo.", ""},
	} {
		pipe := fmt.Sprintf("[model]\npath = %q\n[strategy]\ntype = \"greedy\"\n[[processors]]\ntype = \"regex\"\npattern = '''%s'''\n", llamaGGUF, tc.re)
		res := streamMatchesResponse(t, c, openai.ChatCompletionNewParams{
			Model:     "llama-3.1",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")},
			MaxTokens: openai.Int(100),
			Tools:     toolParams(),
		}, option.WithJSONSet("pipeline", pipe))
		m := res.Choices[0].Message
		call := ""
		for _, tcall := range m.ToolCalls {
			call += tcall.Function.Name + "(" + tcall.Function.Arguments + ")"
		}
		if tc.call == "valid" && len(m.ToolCalls) == 1 {
			doc, err := santhosh.UnmarshalJSON(strings.NewReader(m.ToolCalls[0].Function.Arguments))
			if err == nil && m.ToolCalls[0].Function.Name == "get_weather" && valid["get_weather"].Validate(doc) == nil {
				call = "valid"
			}
		}
		if m.Content != tc.content || call != tc.call {
			t.Errorf("llama-3.1, auto, reply %s: content %q, calls %s", tc.re, m.Content, call)
		}
	}

	post := func(body string) (int, string) {
		resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tools := `[{"type": "function", "function": {"name": "now"}}]`
	if code, body := post(`{"model": "deepseek-r1", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}], "tools": ` + tools + `}`); code != 400 || !strings.Contains(body, `its chat template writes tool calls in no format loom reads`) {
		t.Errorf("tools for a template loom cannot read: %d %s", code, body)
	}
	if code, body := post(`{"model": "deepseek-r1", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}], "tools": ` + tools + `, "tool_choice": "none"}`); code != 200 {
		t.Errorf("tool_choice none: %d %s", code, body)
	}
}

// TestToolRequestErrors: each fault of tools, tool_choice and tool messages is a 400 naming
// the field.
func TestToolRequestErrors(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	tool := `{"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}`
	user := `{"role": "user", "content": "hi"}`
	cases := []struct{ fields, param, msg string }{
		{`"tools": [{"type": "function", "function": {"name": "a b"}}]`, "tools[0].function.name", `"a b": must be 1 to 64 letters`},
		{`"tools": [` + tool + `, ` + tool + `]`, "tools[1].function.name", `"now" is also the name of tools[0]`},
		{`"tools": [{"type": "retrieval"}]`, "tools[0].type", `must be "function"`},
		{`"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array", "uniqueItems": true}}}], "tool_choice": "required"`, "tools[0].function.parameters", "json schema at (root): uniqueItems true is not supported"},
		{`"tool_choice": "required"`, "tool_choice", "needs tools"},
		{`"tools": [` + tool + `], "tool_choice": "always"`, "tool_choice", `"always": must be none, auto, required`},
		{`"tools": [` + tool + `], "tool_choice": {"type": "function", "function": {"name": "later"}}`, "tool_choice.function.name", `"later" is not one of the tools`},
		{`"tools": [` + tool + `], "tool_choice": "required", "response_format": {"type": "json_object"}`, "response_format", "cannot both hold the reply"},
		{`"parallel_tool_calls": false`, "parallel_tool_calls", "needs tools"},
	}
	for _, tc := range cases {
		body := `{"model": "default", "max_tokens": 4, "messages": [` + user + `], ` + tc.fields + `}`
		checkError(t, hs, body, tc.param, tc.msg)
	}
	messages := []struct{ messages, param, msg string }{
		{`{"role": "tool", "content": "21"}`, "messages[0].tool_call_id", "required in a tool message"},
		{`{"role": "user", "content": null}`, "messages[0].content", "missing"},
		{`{"role": "user", "content": "x", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "now", "arguments": "{}"}}]}`, "messages[0].tool_calls", "only an assistant message calls tools"},
		{`{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"arguments": "{}"}}]}`, "messages[0].tool_calls[0].function.name", "missing"},
		{`{"role": "function", "content": "x"}`, "messages[0].role", "must be system, developer, user, assistant or tool"},
	}
	for _, tc := range messages {
		checkError(t, hs, `{"model": "default", "max_tokens": 4, "messages": [`+tc.messages+`]}`, tc.param, tc.msg)
	}
}

func checkError(t *testing.T, hs *httptest.Server, body, param, msg string) {
	t.Helper()
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error struct{ Message, Param string }
	}
	json.Unmarshal(b, &e)
	if resp.StatusCode != 400 || e.Error.Param != param || !strings.Contains(e.Error.Message, msg) {
		t.Errorf("%s\n→ %d %s\nwant 400, param %s, message with %s", body, resp.StatusCode, b, param, msg)
	}
}

// TestToolCallsConcurrent: requests with the same tools, running at once, share one compiled
// grammar (toolcall's cache) and each gets what it gets alone (same seed, same calls); -race
// watches the sharing.
func TestToolCallsConcurrent(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	params := func(seed int64) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:             "creative",
			Messages:          []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Book for two at eight.")},
			MaxTokens:         openai.Int(200),
			Seed:              openai.Int(seed),
			Tools:             toolParams(),
			ToolChoice:        openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
			ParallelToolCalls: openai.Bool(false),
		}
	}
	alone := map[int64]string{}
	for seed := int64(1); seed <= 4; seed++ {
		res, err := c.Chat.Completions.New(context.Background(), params(seed))
		if err != nil {
			t.Fatal(err)
		}
		alone[seed] = res.Choices[0].Message.ToolCalls[0].Function.Name + res.Choices[0].Message.ToolCalls[0].Function.Arguments
	}
	errs := make(chan error, 8)
	for i := range 8 {
		seed := int64(i%4 + 1)
		go func() {
			res, err := c.Chat.Completions.New(context.Background(), params(seed))
			switch {
			case err != nil:
				errs <- err
			case len(res.Choices[0].Message.ToolCalls) != 1:
				errs <- fmt.Errorf("seed %d: no call", seed)
			case res.Choices[0].Message.ToolCalls[0].Function.Name+res.Choices[0].Message.ToolCalls[0].Function.Arguments != alone[seed]:
				errs <- fmt.Errorf("seed %d: %+v, alone %s", seed, res.Choices[0].Message.ToolCalls[0].Function, alone[seed])
			default:
				errs <- nil
			}
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
