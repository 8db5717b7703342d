package chat_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/loomlm/loom/chat"
)

// FuzzTemplate parses arbitrary text as a chat template and renders a conversation with it:
// a template renders or fails with an error, never a panic. The seeds are the real templates
// of testdata/templates.json.
func FuzzTemplate(f *testing.F) {
	b, err := os.ReadFile("testdata/templates.json")
	if err != nil {
		f.Fatal(err)
	}
	var fixtures []fixture
	if err := json.Unmarshal(b, &fixtures); err != nil {
		f.Fatal(err)
	}
	for _, fx := range fixtures {
		f.Add(fx.Template, "Hello, who are you?")
		f.Add(fx.Template, `{"city": "Paris", "n": [1, 2.5e3, true, null]}`)
	}
	f.Add(`{{ tools | tojson(indent=2) }}{% for m in messages %}{{ m | tojson }}{% for k, v in m.items() %}{{ k }}{{ v | list | length }}{% endfor %}{{ m.tool_calls[-1] }}{% endfor %}`, `{"x": {"y": []}}`)
	f.Fuzz(func(t *testing.T, src, content string) {
		if len(src) > 8192 {
			return
		}
		tpl, err := chat.Parse(src)
		if err != nil {
			return
		}
		msgs := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: content}, {Role: "assistant", Content: "Hi."}, {Role: "user", Content: content}}
		_, _ = tpl.Render(msgs, chat.Options{BOS: "<s>", EOS: "</s>", AddGenerationPrompt: true, Now: time.Unix(0, 0)})
		// with tools, a call whose arguments are the fuzzed text (JSON or not) and its result
		calls := []chat.Message{{Role: "user", Content: "Weather?"}, {Role: "assistant", NoContent: true, ToolCalls: []chat.ToolCall{{ID: "call12345", Name: "f", Arguments: content}}},
			{Role: "tool", ToolCallID: "call12345", Content: content}}
		_, _ = tpl.Render(calls, chat.Options{AddGenerationPrompt: true, Now: time.Unix(0, 0), Tools: []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"b": {}, "a": [1, 2.5, null, {"z": "é"}]}}}}`)}})
	})
}
