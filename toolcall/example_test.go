package toolcall_test

import (
	"encoding/json"
	"fmt"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/toolcall"
)

// A reply in a chat template's format is read for its calls; the grammar of the same tools
// holds a reply to well-formed calls.
func Example() {
	tools, err := toolcall.ParseTools([]json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "get_weather",
		"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	template := `... For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags ...`
	format, ok := toolcall.Detect(template)
	fmt.Println(format, ok)

	content, calls := format.Parse("Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>", tools)
	fmt.Printf("%q %+v\n", content, calls)

	cfg, err := format.Compile(tools, "", false)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, reply := range []string{
		format.Write([]toolcall.Call{{Name: "get_weather", Arguments: `{"city":"Oslo"}`}}),
		format.Write([]toolcall.Call{{Name: "get_weather", Arguments: `{"town":"Oslo"}`}}),
	} {
		m := earley.New(cfg)
		_, ok := m.AdvanceBytes([]byte(reply))
		fmt.Println(ok && m.IsAccepting())
	}
	fmt.Println(tools[0].Signature())
	// Output:
	// hermes true
	// "Let me check." [{Name:get_weather Arguments:{"city": "Oslo"} ID:}]
	// true
	// false
	// get_weather(city)
}
