// Package chat renders a conversation into a prompt with a model's chat template: the Jinja
// template a GGUF stores as tokenizer.chat_template, the way Hugging Face's
// apply_chat_template renders it.
//
// Templates run on github.com/nikolalohinski/gonja/v2, a Go implementation of Jinja, with the
// globals chat templates expect added here: raise_exception (the template refuses the
// conversation: Render returns its message as an error) and strftime_now (the current date
// and time in a strftime format). The renderer is checked byte for byte against
// @huggingface/jinja, the reference JavaScript implementation, on the templates of Llama 3.1,
// Qwen2.5, Qwen3, Mistral v0.3 and Nemo, Mixtral, DeepSeek R1 and LLM, Gemma, Zephyr-Gemma
// and Phi-3 (chat/template_test.go).
package chat

import (
	"fmt"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string
	Content string
}

// Options are the variables a template reads besides the messages.
type Options struct {
	// BOS and EOS are the model's bos_token and eos_token texts.
	BOS, EOS string
	// AddGenerationPrompt ends the prompt with the header of the assistant's reply.
	AddGenerationPrompt bool
	// Vars are further variables (date_string, tools, enable_thinking, …).
	Vars map[string]any
	// Now is the time strftime_now formats (the current time when zero).
	Now time.Time
}

// Template is a parsed chat template; it is safe for concurrent use.
type Template struct {
	src string
	tpl *exec.Template
}

// Parse parses a chat template. A syntax error names its line when the library reports one.
func Parse(src string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("chat template: %v", r)
		}
	}()
	tpl, err := gonja.FromString(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return &Template{src: src, tpl: tpl}, nil
}

// Source returns the template's text.
func (t *Template) Source() string { return t.src }

// errRaised carries the message of raise_exception out of the template.
type errRaised struct{ msg string }

func (e *errRaised) Error() string { return e.msg }

// Render renders the conversation. A template that refuses it (raise_exception) returns an
// error with the template's own message.
func (t *Template) Render(msgs []Message, o Options) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat template: %v", r)
		}
	}()
	list := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	var raised *errRaised
	data := map[string]any{
		"messages":              list,
		"bos_token":             o.BOS,
		"eos_token":             o.EOS,
		"add_generation_prompt": o.AddGenerationPrompt,
		"raise_exception": func(msg string) (string, error) {
			raised = &errRaised{msg: msg}
			return "", raised
		},
		"strftime_now": func(format string) string { return strftime(now, format) },
	}
	for k, v := range o.Vars {
		data[k] = v
	}
	s, err := t.tpl.ExecuteToString(exec.NewContext(data))
	if raised != nil {
		return "", fmt.Errorf("chat template refuses the conversation: %s", raised.msg)
	}
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return s, nil
}

// IsRefusal reports whether err is a template's refusal of a conversation (raise_exception),
// a fault of the request rather than of the template.
func IsRefusal(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "chat template refuses the conversation: ")
}

// strftime formats t with the directives of C's strftime that chat templates use.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
