package chat_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomlm/loom/chat"
)

// fixture is one chat template of testdata/templates.json (see testdata/README.md).
type fixture struct {
	Name     string `json:"name"`
	Source   string `json:"source"`
	Template string `json:"template"`
	BOS      string `json:"bos_token"`
	EOS      string `json:"eos_token"`
}

type conversation struct {
	Name                string            `json:"name"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Tools               []json.RawMessage `json:"tools"`
	Vars                map[string]any    `json:"vars"`
	Messages            []struct {
		Role      string  `json:"role"`
		Content   *string `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID       string `json:"tool_call_id"`
		Name             string `json:"name"`
		ReasoningContent string `json:"reasoning_content"`
	} `json:"messages"`
}

// messages are c's messages as chat.Messages.
func (c conversation) messages() []chat.Message {
	msgs := make([]chat.Message, len(c.Messages))
	for i, m := range c.Messages {
		msgs[i] = chat.Message{Role: m.Role, NoContent: m.Content == nil, ToolCallID: m.ToolCallID, Name: m.Name, ReasoningContent: m.ReasoningContent}
		if m.Content != nil {
			msgs[i].Content = *m.Content
		}
		for _, tc := range m.ToolCalls {
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
	}
	return msgs
}

func load[T any](t *testing.T, path string) T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// reference renders every template and conversation with @huggingface/jinja under node
// (installed from testdata/jinja's lockfile when missing).
func reference(t *testing.T) map[string]struct{ Output, Error string } {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required (@huggingface/jinja renders the reference): ", err)
	}
	dir := filepath.Join("testdata", "jinja")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@huggingface", "jinja", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("npm is required to install @huggingface/jinja from testdata/jinja/package-lock.json: ", err)
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	cmd := exec.Command(node, "render.mjs")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node render.mjs: %v", err)
	}
	var rows []struct{ Template, Conversation, Output, Error string }
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatal(err)
	}
	ref := map[string]struct{ Output, Error string }{}
	for _, r := range rows {
		ref[r.Template+"/"+r.Conversation] = struct{ Output, Error string }{r.Output, r.Error}
	}
	return ref
}

// TestTemplatesMatchHuggingFaceJinja renders real models' chat templates with several
// conversations and compares every prompt byte for byte with @huggingface/jinja's; a
// conversation the reference refuses (raise_exception) must be refused too.
func TestTemplatesMatchHuggingFaceJinja(t *testing.T) {
	fixtures := load[[]fixture](t, "testdata/templates.json")
	convs := load[[]conversation](t, "testdata/conversations.json")
	ref := reference(t)
	for _, f := range fixtures {
		tpl, err := chat.Parse(f.Template)
		if err != nil {
			t.Errorf("%s: %v", f.Name, err)
			continue
		}
		for _, c := range convs {
			key := f.Name + "/" + c.Name
			t.Run(key, func(t *testing.T) {
				want, ok := ref[key]
				if !ok {
					t.Fatal("no reference rendering")
				}
				vars := map[string]any{"date_string": "26 Jul 2024"}
				for k, v := range c.Vars {
					vars[k] = v
				}
				got, err := tpl.Render(c.messages(), chat.Options{BOS: f.BOS, EOS: f.EOS, AddGenerationPrompt: c.AddGenerationPrompt,
					Tools: c.Tools, Vars: vars})
				switch {
				case want.Error != "":
					if err == nil || !chat.IsRefusal(err) {
						t.Fatalf("the reference refuses (%s); loom: %q, %v", want.Error, got, err)
					}
					if msg := strings.TrimPrefix(want.Error, "Error: "); !strings.Contains(err.Error(), msg) {
						t.Errorf("refusal %q, the reference's %q", err, msg)
					}
				case err != nil:
					t.Fatalf("%v; the reference renders %q", err, want.Output)
				case got != want.Output:
					t.Errorf("rendered\n%q\nthe reference\n%q", got, want.Output)
				}
			})
		}
	}
}

func TestStrftimeNowAndErrors(t *testing.T) {
	tpl, err := chat.Parse(`{{ strftime_now("%d %b %Y, %A %H:%M") }}|{{ messages[0].content }}`)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, time.November, 3, 7, 5, 0, 0, time.UTC)
	got, err := tpl.Render([]chat.Message{{Role: "user", Content: "hi"}}, chat.Options{Now: now})
	if err != nil || got != "03 Nov 2026, Tuesday 07:05|hi" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := chat.Parse(`{% for m in messages %}{{ m.content }}`); err == nil {
		t.Error("an unclosed for parsed")
	}
	refuse, _ := chat.Parse(`{{ raise_exception("only users speak") }}`)
	if _, err := refuse.Render(nil, chat.Options{}); !chat.IsRefusal(err) || !strings.Contains(err.Error(), "only users speak") {
		t.Errorf("raise_exception: %v", err)
	}
}

// TestExpressionsMatchHuggingFaceJinja renders the small templates of
// testdata/expressions.json (tojson, items, keys, negative indices over the JSON of tools)
// and compares each with @huggingface/jinja's rendering.
func TestExpressionsMatchHuggingFaceJinja(t *testing.T) {
	fx := load[struct {
		Context struct {
			Messages []struct{ Role, Content string } `json:"messages"`
			Tools    []json.RawMessage                `json:"tools"`
		} `json:"context"`
		Expressions []struct{ Name, Template string } `json:"expressions"`
	}](t, "testdata/expressions.json")
	ref := reference(t)
	var msgs []chat.Message
	for _, m := range fx.Context.Messages {
		msgs = append(msgs, chat.Message{Role: m.Role, Content: m.Content})
	}
	for _, x := range fx.Expressions {
		t.Run(x.Name, func(t *testing.T) {
			want := ref["expressions/"+x.Name]
			if want.Error != "" {
				t.Fatalf("the reference fails: %s", want.Error)
			}
			tpl, err := chat.Parse(x.Template)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Render(msgs, chat.Options{Tools: fx.Context.Tools})
			if err != nil || got != want.Output {
				t.Errorf("rendered %q, %v\nthe reference %q", got, err, want.Output)
			}
		})
	}
}
