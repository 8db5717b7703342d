package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/loomlm/loom/server"
)

// TestRetrieveModel: the SDK's models.Get finds a loaded pipeline, and an unknown one is a
// 404 model_not_found.
func TestRetrieveModel(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	m, err := c.Models.Get(context.Background(), "greedy")
	if err != nil || m.ID != "greedy" || m.Object != "model" || m.OwnedBy != "loom" || m.Created == 0 {
		t.Fatalf("models.Get(greedy) = %+v, %v", m, err)
	}
	list, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list.Data {
		if l.ID == "greedy" && (l.Created != m.Created || l.OwnedBy != m.OwnedBy) {
			t.Errorf("listed %+v, retrieved %+v", l, m)
		}
	}
	_, err = c.Models.Get(context.Background(), "nope")
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Code != "model_not_found" {
		t.Errorf("models.Get(nope): %v", err)
	}
}

// TestTokenize: /tokenize counts a prompt's tokens as a completion request counts them and a
// conversation's (tools and template variables included) as a chat request does, with the
// plain template and a model's own; /detokenize turns them back into text.
func TestTokenize(t *testing.T) {
	s, hs := newServer(t, server.Options{})
	if err := s.Load(thinkingModel(t)); err != nil {
		t.Fatal(err)
	}
	c := client(hs)
	ctx := context.Background()
	post := func(path, body string, out any) (int, string) {
		t.Helper()
		resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode == 200 {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, string(b)
	}
	type tokens struct {
		Tokens      []int
		Count       int
		MaxModelLen int `json:"max_model_len"`
	}

	var tk tokens
	if code, body := post("/tokenize", `{"model": "greedy", "prompt": "And God said"}`, &tk); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	res, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")}, MaxTokens: openai.Int(1)})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Count != len(tk.Tokens) || int64(tk.Count) != res.Usage.PromptTokens || tk.MaxModelLen != 512 {
		t.Errorf("tokenize %+v; the completion's prompt_tokens %d", tk, res.Usage.PromptTokens)
	}
	var text struct{ Prompt string }
	ids, _ := json.Marshal(tk.Tokens)
	if code, body := post("/detokenize", `{"model": "greedy", "tokens": `+string(ids)+`}`, &text); code != 200 || text.Prompt != "And God said" {
		t.Errorf("detokenize %s: %d %s", ids, code, body)
	}
	var bare, llama tokens
	post("/tokenize", `{"model": "greedy", "prompt": "And God said", "add_special_tokens": false}`, &bare)
	if len(bare.Tokens) >= len(tk.Tokens) || !slices.Equal(bare.Tokens, tk.Tokens[len(tk.Tokens)-len(bare.Tokens):]) {
		t.Errorf("add_special_tokens false: %v, with them %v", bare.Tokens, tk.Tokens)
	}
	// llama-server's names for the same
	post("/tokenize", `{"model": "greedy", "content": "And God said", "add_special": false}`, &llama)
	var content struct{ Content string }
	post("/detokenize", `{"model": "greedy", "tokens": `+string(ids)+`}`, &content)
	if !slices.Equal(llama.Tokens, bare.Tokens) || content.Content != "And God said" {
		t.Errorf("llama-server's shape: %v, %q", llama.Tokens, content.Content)
	}

	// Conversations: as many tokens as the chat request's prompt.
	tool := `{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`
	for _, tc := range []struct{ model, fields string }{
		{"greedy", `"messages": [{"role": "system", "content": "Speak plainly."}, {"role": "user", "content": "Tell me of the sea."}]`},
		{"greedy", `"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [` + tool + `]`},
		{"qwen3", `"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [` + tool + `], "chat_template_kwargs": {"enable_thinking": false}`},
	} {
		var got tokens
		if code, body := post("/tokenize", `{"model": "`+tc.model+`", `+tc.fields+`}`, &got); code != 200 {
			t.Fatalf("%s: %d %s", tc.fields, code, body)
		}
		// tool_choice none: the tools are in the prompt, the one-token reply is not read
		var chat struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
		if code, body := post("/v1/chat/completions", `{"model": "`+tc.model+`", "max_tokens": 1, "tool_choice": "none", `+tc.fields+`}`, &chat); code != 200 {
			t.Fatalf("chat: %d %s", code, body)
		}
		if got.Count != chat.Usage.PromptTokens || got.Count != len(got.Tokens) {
			t.Errorf("%s %s: tokenize counts %d (%d ids), the chat request %d", tc.model, tc.fields, got.Count, len(got.Tokens), chat.Usage.PromptTokens)
		}
	}

	for _, e := range []struct {
		path, body, param, msg string
		status                 int
	}{
		{"/tokenize", `{"model": "nope", "prompt": "x"}`, "model", "no such pipeline", 404},
		{"/tokenize", `{"model": "greedy"}`, "prompt", "missing", 400},
		{"/tokenize", `{"model": "greedy", "prompt": "x", "messages": [{"role": "user", "content": "x"}]}`, "messages", "either prompt or messages", 400},
		{"/tokenize", `{"model": "greedy", "prompt": "x", "tools": []}`, "tools", "only with messages", 400},
		{"/tokenize", `{"model": "greedy", "messages": []}`, "messages", "must not be empty", 400},
		{"/tokenize", `{"model": "greedy", "prompt": 5}`, "prompt", "must be a string", 400},
		{"/tokenize", `{"model": "greedy", "prompt": "x", "content": "x"}`, "content", "either prompt or content", 400},
		// refused where the chat request would be
		{"/tokenize", `{"model": "greedy", "messages": [{"role": "user", "content": "x"}], "tools": [` + tool + `], "tool_choice": "always"}`, "tool_choice", `"always": must be none, auto, required`, 400},
		{"/tokenize", `{"model": "greedy", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array", "uniqueItems": true}}}]}`, "tools[0].function.parameters", "uniqueItems true is not supported", 400},
		{"/tokenize", `{"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "reasoning_format": "xml"}`, "reasoning_format", `"xml": must be auto`, 400},
		{"/tokenize", `{"model": "greedy", "prompt": "x", "tool_choice": "none"}`, "tool_choice", "only with messages", 400},
		{"/detokenize", `{"model": "greedy", "tokens": [1, 99999]}`, "tokens[1]", "99999 is not a token", 400},
		{"/detokenize", `{"model": "greedy"}`, "tokens", "missing", 400},
	} {
		code, body := post(e.path, e.body, nil)
		var out struct {
			Error struct{ Param, Message string }
		}
		_ = json.Unmarshal([]byte(body), &out)
		if code != e.status || out.Error.Param != e.param || !strings.Contains(out.Error.Message, e.msg) {
			t.Errorf("%s %s: %d %s", e.path, e.body, code, body)
		}
	}
}
