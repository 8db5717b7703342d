package server

import (
	"fmt"
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

// chatPrompt renders a chat request's messages. A model that declares its own template is
// refused until loom renders Jinja templates: using the plain one there would silently give the
// model a format it was not trained on.
func chatPrompt(e *entry, msgs []chatMessage) (string, error) {
	if len(msgs) == 0 {
		return "", badParam("messages", "must not be empty")
	}
	if _, ok := chatTemplate(e.model.raw); ok {
		return "", &APIError{Status: 400, Type: "invalid_request_error", Param: codeOf("messages"), Code: codeOf("chat_template_unsupported"),
			Message: fmt.Sprintf("model %q: its GGUF declares tokenizer.chat_template, which loom serve cannot render yet; use /v1/completions with the formatted prompt", e.name)}
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
			return "", badParam(fmt.Sprintf("messages[%d].role", i), "%q: must be system, developer, user or assistant", m.Role)
		}
		text, err := messageText(i, m)
		if err != nil {
			return "", err
		}
		contents[i] = text
	}
	return PlainChatTemplate(roles, contents), nil
}
