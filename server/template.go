package server

import (
	"fmt"
	"github.com/loomlm/loom/chat"
	"strings"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
)

// PlainChatStops are the stop strings a chat request gets with the plain template, so that
// the model's reply ends where it would start the next turn.
var PlainChatStops = []string{"\nuser:", "\nsystem:"}

// PlainChatTemplate renders messages for a model without a chat template (such as the embedded
// models): each message on its own line as "role: content", then "assistant:" for the reply.
//
//	system: You are terse.
//	user: Hello
//	assistant:
func PlainChatTemplate(roles, contents []string) string {
	var b strings.Builder
	for i := range roles {
		fmt.Fprintf(&b, "%s: %s\n", roles[i], contents[i])
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

// chatPrompt renders a chat request's messages: with the model's own chat template (GGUF
// tokenizer.chat_template; templated is then true and the prompt holds its special tokens as
// text), or the plain template for a model without one.
func chatPrompt(e *entry, msgs []chatMessage) (prompt string, templated bool, err error) {
	if len(msgs) == 0 {
		return "", false, badParam("messages", "must not be empty")
	}
	roles := make([]string, len(msgs))
	contents := make([]string, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
			roles[i] = m.Role
		case "developer":
			roles[i] = "system"
		default:
			return "", false, badParam(fmt.Sprintf("messages[%d].role", i), "%q: must be system, developer, user or assistant", m.Role)
		}
		text, err := messageText(i, m)
		if err != nil {
			return "", false, err
		}
		contents[i] = text
	}
	tpl, err := e.model.template()
	if err != nil {
		return "", false, &APIError{Status: 500, Type: "server_error", Code: codeOf("chat_template_invalid"),
			Message: fmt.Sprintf("model %q: %v", e.name, err)}
	}
	if tpl == nil {
		return PlainChatTemplate(roles, contents), false, nil
	}
	cm := make([]chat.Message, len(msgs))
	for i := range msgs {
		cm[i] = chat.Message{Role: roles[i], Content: contents[i]}
	}
	tok := e.model.tok
	sp := tok.Special()
	var o chat.Options
	o.AddGenerationPrompt = true
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
