package toolcall_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/toolcall"
)

var weatherTools = []json.RawMessage{
	json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "description": "The weather now.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}, "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"], "additionalProperties": false}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "local_time", "parameters": {"type": "object", "properties": {"zone": {"$ref": "#/$defs/zone"}}, "required": ["zone"], "$defs": {"zone": {"type": "string", "pattern": "^[A-Z][a-z]+/[A-Z][a-z_]+$"}}}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "now"}}`),
}

func mustTools(t *testing.T) []toolcall.Tool {
	t.Helper()
	tools, err := toolcall.ParseTools(weatherTools)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// accepts reports whether the grammar's language holds text.
func accepts(t *testing.T, g *grammar.Grammar, text string) bool {
	t.Helper()
	cfg, err := grammar.Compile(g, "root")
	if err != nil {
		t.Fatal(err)
	}
	m := earley.New(cfg)
	if n, ok := m.AdvanceBytes([]byte(text)); !ok {
		_ = n
		return false
	}
	return m.IsAccepting()
}

// TestGrammarHoldsCallsToTheSchemas: the grammar of each format accepts the calls Write
// writes with valid arguments (each tool, several calls where parallel), and refuses
// arguments its tool's schema rejects, unknown tools, text around the calls, and a second
// call where the request allows one.
func TestGrammarHoldsCallsToTheSchemas(t *testing.T) {
	tools := mustTools(t)
	valid := []toolcall.Call{
		{Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`},
		{Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		{Name: "local_time", Arguments: `{"zone":"Europe/Paris"}`},
		{Name: "now", Arguments: `{}`},
	}
	invalid := []toolcall.Call{
		{Name: "get_weather", Arguments: `{"unit":"celsius"}`},               // city is required
		{Name: "get_weather", Arguments: `{"city":"Paris","unit":"kelvin"}`}, // not in the enum
		{Name: "get_weather", Arguments: `{"city":"Paris","wind":true}`},     // no other properties
		{Name: "local_time", Arguments: `{"zone":"paris"}`},                  // the pattern
		{Name: "now", Arguments: `{"x":1}`},                                  // no parameters
		{Name: "get_time", Arguments: `{}`},                                  // no such tool
	}
	for _, f := range []toolcall.Format{toolcall.Hermes, toolcall.Llama3, toolcall.Mistral} {
		t.Run(f.String(), func(t *testing.T) {
			anyTool, err := f.Grammar(tools, "", true)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range valid {
				if text := f.Write([]toolcall.Call{c}); !accepts(t, anyTool, text) {
					t.Errorf("refuses %q", text)
				}
				only, err := f.Grammar(tools, c.Name, false)
				if err != nil {
					t.Fatal(err)
				}
				if text := f.Write([]toolcall.Call{c}); !accepts(t, only, text) {
					t.Errorf("tool_choice %s refuses %q", c.Name, text)
				}
				for _, other := range valid {
					if other.Name != c.Name && accepts(t, only, f.Write([]toolcall.Call{other})) {
						t.Errorf("tool_choice %s accepts a call of %s", c.Name, other.Name)
					}
				}
			}
			for _, c := range invalid {
				if text := f.Write([]toolcall.Call{c}); accepts(t, anyTool, text) {
					t.Errorf("accepts %q", text)
				}
			}
			two := f.Write(valid[:2])
			switch f {
			case toolcall.Hermes:
				two = f.Write(valid[:1]) + "\n" + f.Write(valid[1:2])
			case toolcall.Llama3:
				two = f.Write(valid[:1]) + f.Write(valid[1:2])
			}
			single, _ := f.Grammar(tools, "", false)
			if accepts(t, single, two) {
				t.Errorf("parallel false accepts two calls %q", two)
			}
			if got := accepts(t, anyTool, two); got != (f != toolcall.Llama3) {
				t.Errorf("parallel: two calls %q accepted %v", two, got)
			}
			if f == toolcall.Mistral { // an id of nine letters and digits, and v0.3's space
				withID := []toolcall.Call{{Name: "now", Arguments: "{}", ID: "a1B2c3D4e"}}
				if text := f.Write(withID); !accepts(t, anyTool, text) || !accepts(t, anyTool, strings.Replace(text, "[TOOL_CALLS][", "[TOOL_CALLS] [", 1)) {
					t.Errorf("refuses %q or it with a space", text)
				}
				if text := f.Write([]toolcall.Call{{Name: "now", Arguments: "{}", ID: "short"}}); accepts(t, anyTool, text) {
					t.Errorf("accepts %q", text)
				}
			}
			if accepts(t, anyTool, "Sure. "+f.Write(valid[:1])) || accepts(t, anyTool, f.Write(valid[:1])+" done") {
				t.Error("accepts text around a call")
			}
		})
	}
}

// TestParseReadsWhatWriteWrites and what models write around it; anything but well-formed
// calls of known tools is content.
func TestParseReadsWhatWriteWrites(t *testing.T) {
	tools := mustTools(t)
	calls := []toolcall.Call{{Name: "get_weather", Arguments: `{"city": "Paris"}`}, {Name: "now", Arguments: `{}`}}
	cases := []struct {
		f           toolcall.Format
		reply       string
		wantContent string
		wantCalls   []toolcall.Call
	}{
		{toolcall.Hermes, toolcall.Hermes.Write(calls), "", calls},
		{toolcall.Hermes, "Let me look.\n\n" + toolcall.Hermes.Write(calls[:1]) + "\n", "Let me look.", calls[:1]},
		{toolcall.Hermes, "<tool_call>\n{\"name\": \"now\", \"parameters\": {}}\n</tool_call>", "", []toolcall.Call{{Name: "now", Arguments: "{}"}}},
		{toolcall.Hermes, "no calls here", "no calls here", nil},
		{toolcall.Hermes, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", nil},
		{toolcall.Hermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}", nil},
		{toolcall.Hermes, toolcall.Hermes.Write(calls[:1]) + " and more", toolcall.Hermes.Write(calls[:1]) + " and more", nil},
		{toolcall.Hermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": \"{}\"}\n</tool_call>", "<tool_call>\n{\"name\": \"now\", \"arguments\": \"{}\"}\n</tool_call>", nil},
		{toolcall.Llama3, toolcall.Llama3.Write(calls[:1]), "", calls[:1]},
		{toolcall.Llama3, " {\"name\": \"now\", \"arguments\": {}}\n", "", []toolcall.Call{{Name: "now", Arguments: "{}"}}},
		{toolcall.Llama3, "It is sunny.", "It is sunny.", nil},
		{toolcall.Llama3, "{\"name\": \"now\", \"parameters\": {}} {", "{\"name\": \"now\", \"parameters\": {}} {", nil},
		{toolcall.Mistral, toolcall.Mistral.Write(calls), "", calls},
		{toolcall.Mistral, "Let me look. [TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}, \"id\": \"abcdefghi\"}]", "Let me look.", []toolcall.Call{{Name: "now", Arguments: "{}", ID: "abcdefghi"}}},
		{toolcall.Mistral, "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}, \"id\": \"abc\"}]", "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}, \"id\": \"abc\"}]", nil},
		{toolcall.Mistral, "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}] more", "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}] more", nil},
		{toolcall.Mistral, "[TOOL_CALLS][{\"name\": \"nope\", \"arguments\": {}}]", "[TOOL_CALLS][{\"name\": \"nope\", \"arguments\": {}}]", nil},
		{toolcall.Mistral, "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}, \"extra\": 1}]", "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}, \"extra\": 1}]", nil},
		{toolcall.Mistral, "[TOOL_CALLS][]", "[TOOL_CALLS][]", nil},
		{toolcall.Mistral, "It is sunny.", "It is sunny.", nil},
	}
	for _, c := range cases {
		content, got := c.f.Parse(c.reply, tools)
		if content != c.wantContent || len(got) != len(c.wantCalls) {
			t.Errorf("%s %q: content %q, calls %v; want %q, %v", c.f, c.reply, content, got, c.wantContent, c.wantCalls)
			continue
		}
		for i := range got {
			if got[i] != c.wantCalls[i] {
				t.Errorf("%s %q: call %d %v, want %v", c.f, c.reply, i, got[i], c.wantCalls[i])
			}
		}
	}
}

func TestParseToolsErrorsNameTheField(t *testing.T) {
	cases := []struct{ tools, want string }{
		{`[{"type": "function"}]`, "tools[0].function: missing"},
		{`[{"type": "code_interpreter", "function": {"name": "f"}}]`, `tools[0].type: "code_interpreter": must be "function"`},
		{`[{"type": "function", "function": {"name": "get weather"}}]`, `tools[0].function.name: "get weather": must be 1 to 64`},
		{`[{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]`, `tools[1].function.name: "f" is also the name of tools[0]`},
		{`[{"type": "function", "function": {"name": "f", "parameters": {"type": }}}]`, "tools[0]: must be"},
		{`[{"type": "function", "function": {"name": "f", "params": {}}}]`, `unknown field "params"`},
	}
	for _, c := range cases {
		var raw []json.RawMessage
		if err := json.Unmarshal([]byte(c.tools), &raw); err != nil {
			// a tool that is not JSON at all is the request decoder's to report
			raw = []json.RawMessage{json.RawMessage(strings.TrimSuffix(strings.TrimPrefix(c.tools, "["), "]"))}
		}
		_, err := toolcall.ParseTools(raw)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.tools, err, c.want)
		}
	}
	tools := mustTools(t)
	bad := append(tools, toolcall.Tool{Name: "remote", Parameters: json.RawMessage(`{"$ref": "https://example.com/schema.json"}`)})
	if _, err := toolcall.Hermes.Grammar(bad, "", true); err == nil || !strings.Contains(err.Error(), "tools[3].function.parameters: json schema") {
		t.Errorf("a schema that does not compile: %v", err)
	}
	if _, err := toolcall.Hermes.Grammar(tools, "get_time", false); err == nil || !strings.Contains(err.Error(), `"get_time" is not one of the tools`) {
		t.Errorf("tool_choice of an unknown tool: %v", err)
	}
}

func TestDetect(t *testing.T) {
	cases := []struct {
		template string
		want     toolcall.Format
		ok       bool
	}{
		{`{{- "<tool_call>\n" }}`, toolcall.Hermes, true},
		{`{%- if message.role == "ipython" %}{"name": function name, "parameters": dictionary}`, toolcall.Llama3, true},
		{`[TOOL_CALLS]`, toolcall.Mistral, true},
		{`<｜tool▁calls▁begin｜>`, 0, false},
		{`{{ messages }}`, 0, false},
	}
	for _, c := range cases {
		f, ok := toolcall.Detect(c.template)
		if ok != c.ok || ok && f != c.want {
			t.Errorf("%q: %v %v, want %v %v", c.template, f, ok, c.want, c.ok)
		}
	}
}

// TestDetectRealTemplates: the chat templates of chat/testdata name the format their models
// were trained on (Llama 3.1's JSON, Qwen's <tool_call> tags, Mistral's [TOOL_CALLS]), and the
// others, which write calls in other special tokens or not at all, none.
func TestDetectRealTemplates(t *testing.T) {
	b, err := os.ReadFile("../chat/testdata/templates.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixtures []struct{ Name, Template string }
	if err := json.Unmarshal(b, &fixtures); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"llama-3.1": "llama3", "qwen2.5": "hermes", "qwen3": "hermes", "mistral-v0.3": "mistral", "mistral-nemo": "mistral"}
	for _, fx := range fixtures {
		f, ok := toolcall.Detect(fx.Template)
		got := ""
		if ok {
			got = f.String()
		}
		if got != want[fx.Name] {
			t.Errorf("%s: format %q, want %q", fx.Name, got, want[fx.Name])
		}
	}
}

func TestSignature(t *testing.T) {
	tools := mustTools(t)
	want := []string{"get_weather(city, unit?)", "local_time(zone)", "now()"}
	for i, tool := range tools {
		if got := tool.Signature(); got != want[i] {
			t.Errorf("%s, want %s", got, want[i])
		}
	}
}
