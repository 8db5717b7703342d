package chat_test

import (
	"encoding/json"
	"fmt"

	"github.com/loomlm/loom/chat"
)

// A conversation that called a tool renders with the tools, the assistant's call and the
// tool's result, as the template writes them: the tools' JSON keeps its keys' order.
func ExampleTemplate_Render_tools() {
	tpl, err := chat.Parse(`{%- if tools %}<tools>{% for t in tools %}{{ t.function | tojson }}{% endfor %}</tools>
{% endif %}
{%- for m in messages %}
{%- if m.tool_calls %}{{ m.role }}: {% for c in m.tool_calls %}<call>{{ {"name": c.function.name, "arguments": c.function.arguments} | tojson }}</call>{% endfor %}
{% elif m.role == "tool" %}{{ m.role }} ({{ m.tool_call_id }}): {{ m.content }}
{% else %}{{ m.role }}: {{ m.content }}
{% endif %}
{%- endfor %}assistant:`)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := tpl.Render([]chat.Message{
		{Role: "user", Content: "Weather in Oslo?"},
		{Role: "assistant", NoContent: true, ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Oslo", "unit": "C"}`}}},
		{Role: "tool", ToolCallID: "call_1", Content: "rain, 4 °C"},
	}, chat.Options{Tools: []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}}}}}`)}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out)
	// Output:
	// <tools>{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}}}}</tools>
	// user: Weather in Oslo?
	// assistant: <call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}</call>
	// tool (call_1): rain, 4 °C
	// assistant:
}
