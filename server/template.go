package server

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loomlm/loom/chat"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
	"github.com/loomlm/loom/toolcall"
)

// PlainChatStops are the stop strings a chat request gets with the plain template, so that
// the model's reply ends where it would start the next turn.
var PlainChatStops = []string{"\nuser:", "\nsystem:", "\ntool:"}

// PlainChatTemplate renders messages for a model without a chat template (such as the embedded
// models): each message on its own line as "role: content", then "assistant:" for the reply.
//
//	system: You are terse.
//	user: Hello
//	assistant:
func PlainChatTemplate(roles, contents []string) string {
	msgs := make([]chat.Message, len(roles))
	for i := range roles {
		msgs[i] = chat.Message{Role: roles[i], Content: contents[i]}
	}
	return PlainChatPrompt(msgs, nil)
}

// PlainChatPrompt is PlainChatTemplate with tools: a first line "tools: " and each tool's
// signature (toolcall.Tool.Signature: its name and its parameters, "?" after the optional
// ones; the schemas themselves are the constraint's, and would fill a small model's context),
// an assistant message's calls after its content in the Hermes format that replies call tools
// in (<tool_call> tags, toolcall.Hermes), and a tool message as "tool: " and its content.
//
//	tools: get_weather(city, unit?), local_time(zone)
//	user: Weather in Oslo?
//	assistant: <tool_call>
//	{"name": "get_weather", "arguments": {"city":"Oslo"}}
//	</tool_call>
//	tool: rain, 4 °C
//	assistant:
func PlainChatPrompt(msgs []chat.Message, tools []toolcall.Tool) string {
	var b strings.Builder
	if len(tools) > 0 {
		sigs := make([]string, len(tools))
		for i, t := range tools {
			sigs[i] = t.Signature()
		}
		fmt.Fprintf(&b, "tools: %s\n", strings.Join(sigs, ", "))
	}
	for _, m := range msgs {
		text := m.Content
		if len(m.ToolCalls) > 0 {
			calls := make([]toolcall.Call, len(m.ToolCalls))
			for i, c := range m.ToolCalls {
				calls[i] = toolcall.Call{Name: c.Name, Arguments: c.Arguments}
			}
			if text != "" {
				text += "\n"
			}
			text += toolcall.Hermes.Write(calls)
		}
		fmt.Fprintf(&b, "%s: %s\n", m.Role, text)
	}
	b.WriteString("assistant:")
	return b.String()
}

// chatTemplate returns the model's own chat template (GGUF tokenizer.chat_template), if any.
func chatTemplate(m core.Model) (string, bool) {
	f, ok := m.(interface{ File() *gguf.File })
	if !ok || f.File() == nil {
		return "", false
	}
	v, ok := f.File().Value("tokenizer.chat_template")
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// template returns the model's parsed chat template, nil when it has none.
func (m *sharedModel) template() (*chat.Template, error) {
	m.tplOnce.Do(func() {
		if src, ok := chatTemplate(m.raw); ok {
			m.tpl, m.tplErr = chat.Parse(src)
		}
	})
	return m.tpl, m.tplErr
}

// chatPrompt renders a chat request's messages and tools: with the model's own chat template
// (GGUF tokenizer.chat_template; templated is then true and the prompt holds its special
// tokens as text), or the plain template for a model without one. It sets tu's format: the
// template's, or Hermes for the plain template.
//
// vars are further variables for the template (chat_template_kwargs); the plain template
// has none, so they are refused there.
func chatPrompt(e *entry, msgs []chatMessage, tu *toolUse, vars map[string]any) (prompt string, templated bool, err error) {
	cm, err := chatMessages(msgs)
	if err != nil {
		return "", false, err
	}
	var tools []json.RawMessage
	if tu != nil {
		tools = tu.raw
	}
	tpl, err := e.model.template()
	if err != nil {
		return "", false, &APIError{Status: 500, Type: "server_error", Code: codeOf("chat_template_invalid"),
			Message: fmt.Sprintf("model %q: %v", e.name, err)}
	}
	if tpl == nil {
		if len(vars) > 0 {
			return "", false, badParam("chat_template_kwargs", "model %q has no chat template (it is written with loom's plain template, which takes no variables)", e.name)
		}
		if tu != nil {
			tu.format = toolcall.Hermes
		}
		var parsed []toolcall.Tool
		if tu != nil {
			parsed = tu.tools
		}
		return PlainChatPrompt(cm, parsed), false, nil
	}
	if tu.reads() {
		f, ok := toolcall.Detect(tpl.Source())
		if !ok {
			return "", false, badParam("tools", "model %q: its chat template writes tool calls in no format loom reads (Hermes <tool_call> tags, Llama 3's JSON, Mistral's [TOOL_CALLS]), so its replies cannot be read for calls; send tool_choice \"none\" to show the tools to the model anyway", e.name)
		}
		tu.format = f
	}
	tok := e.model.tok
	sp := tok.Special()
	o := chat.Options{AddGenerationPrompt: true, Tools: tools, Vars: vars}
	if sp.BOS >= 0 {
		o.BOS = tok.Piece(sp.BOS)
	}
	if sp.EOS >= 0 {
		o.EOS = tok.Piece(sp.EOS)
	}
	out, err := tpl.Render(cm, o)
	switch {
	case chat.IsRefusal(err):
		return "", false, badParam("messages", "model %q: %v", e.name, err)
	case err != nil:
		return "", false, &APIError{Status: 500, Type: "server_error", Code: codeOf("chat_template_failed"),
			Message: fmt.Sprintf("model %q: %v", e.name, err)}
	}
	return out, true, nil
}
