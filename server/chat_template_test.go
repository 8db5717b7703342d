package server_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
	"github.com/loomlm/loom/model/tokenizer"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// withTemplate copies a small llama.cpp reference model with tokenizer.chat_template set and
// returns a pipeline file serving it.
func withTemplate(t *testing.T, name, template string) string {
	t.Helper()
	return withTemplateFrom(t, "../testdata/llamacpp-quant/tiny-f16.gguf", name, template, nil)
}

// withTemplateFrom is withTemplate on a copy of the model file path, with the metadata values
// of set changed or added (in the order of their keys); an empty template writes none.
func withTemplateFrom(t *testing.T, path, name, template string, set map[string]any) string {
	t.Helper()
	src, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, kv := range src.Metadata {
		if kv.Key == "tokenizer.chat_template" {
			continue
		}
		v := kv.Value
		if nv, ok := set[kv.Key]; ok {
			v = nv
		}
		if err := w.Set(kv.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !src.Has(k) {
			if err := w.Set(k, set[k]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if template != "" {
		if err := w.Set("tokenizer.chat_template", template); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range src.Tensors {
		data, err := src.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := w.WriteFile(filepath.Join(dir, "m.gguf")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".toml")
	os.WriteFile(p, []byte("[model]\npath = \"m.gguf\"\n\n[generation]\nmax_new_tokens = 8\n\n[strategy]\ntype = \"greedy\"\n"), 0o644)
	return p
}

// TestChatTemplateFromGGUF: a model that declares a chat template gets its chat rendered by
// it (special tokens parsed, no second BOS), a conversation the template refuses is a 400, and
// a template that does not parse is a 500 naming the model.
func TestChatTemplateFromGGUF(t *testing.T) {
	const tpl = `{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' and not loop.first %}{{ raise_exception('the system message must come first') }}{% endif %}{{ m['role'] | upper }}: {{ m['content'] | trim }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}`
	s := server.New(server.Options{})
	t.Cleanup(func() { s.Close() })
	if err := s.Load(withTemplate(t, "templated", tpl)); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(withTemplate(t, "broken", "{% for m in messages %}{{ m.content }}")); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c := client(hs)
	res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "templated",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("  Hello  ")},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The prompt the template renders, tokenised with its special tokens and nothing added.
	tok, err := tokenizer.Load("../testdata/llamacpp-quant/tiny-f16.gguf")
	if err != nil {
		t.Fatal(err)
	}
	want := "<s>SYSTEM: Be brief.</s>USER: Hello</s>ASSISTANT:"
	ids, err := tok.Encode(want, core.EncodeOptions{ParseSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] != tok.Special().BOS || ids[1] == tok.Special().BOS {
		t.Fatalf("the rendered prompt encodes to %v: want one BOS first", ids[:2])
	}
	if got := res.Usage.PromptTokens; got != int64(len(ids)) {
		t.Errorf("prompt_tokens %d, want %d (the template's prompt %q)", got, len(ids), want)
	}

	_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "templated",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi"), openai.SystemMessage("late")},
	})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Message, "the system message must come first") {
		t.Errorf("refused conversation: %v", err)
	}
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model": "broken", "messages": [{"role": "user", "content": "hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(b), `model \"broken\"`) || !strings.Contains(string(b), "chat template") {
		t.Errorf("broken template: %d %s", resp.StatusCode, b)
	}
}
