// Package chat renders a conversation into a prompt with a model's chat template: the Jinja
// template a GGUF stores as tokenizer.chat_template, the way Hugging Face's
// apply_chat_template renders it.
//
// Templates run on github.com/nikolalohinski/gonja/v2, a Go implementation of Jinja, with the
// globals chat templates expect added here: raise_exception (the template refuses the
// conversation: Render returns its message as an error) and strftime_now (the current date
// and time in a strftime format). Where gonja differs from the Jinja of Hugging Face's
// templates, loom's environment replaces it: tojson writes Python's separators and keeps the
// order of the keys of the JSON a rendering was given (tools, tool calls' arguments), items,
// keys() and values() walk that order, and a list's [-1] is its last item even when it has
// only one. Conversations may carry tools (Options.Tools), assistant turns that call them and
// tool turns that answer (Message). The renderer is checked byte for byte against
// @huggingface/jinja, the reference JavaScript implementation, on the templates of Llama 3.1,
// Qwen2.5, Qwen3, Mistral v0.3 and Nemo, Mixtral, DeepSeek R1 and LLM, Gemma, Zephyr-Gemma
// and Phi-3, with and without tools (chat/template_test.go).
package chat

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one turn of a conversation, as OpenAI's chat API and Hugging Face's templates
// describe it.
type Message struct {
	Role    string
	Content string
	// NoContent renders content as none (null): an assistant turn that only calls tools.
	NoContent bool
	// ToolCalls are an assistant turn's calls of tools.
	ToolCalls []ToolCall
	// ToolCallID is the call a "tool" turn answers; Name, when set, the tool's name.
	ToolCallID string
	Name       string
	// ReasoningContent is an assistant turn's thinking, kept apart from its content (a
	// reasoning model's reply, package reasoning); a template sees it as reasoning_content
	// when it is set (Qwen3's writes it back in a <think> block).
	ReasoningContent string
}

// ToolCall is one call of a tool in an assistant turn. A template sees it as Hugging Face's
// do: {"id", "type": "function", "function": {"name", "arguments"}}, with the arguments
// decoded to an object (templates write them with tojson), or as the string itself when it
// is not JSON.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Options are the variables a template reads besides the messages.
type Options struct {
	// BOS and EOS are the model's bos_token and eos_token texts.
	BOS, EOS string
	// AddGenerationPrompt ends the prompt with the header of the assistant's reply.
	AddGenerationPrompt bool
	// Tools are the tools the model may call, each the JSON object of OpenAI's tools list
	// ({"type": "function", "function": {"name", "description", "parameters"}}); a template
	// sees them as the list tools, their keys in the order the JSON gives them.
	Tools []json.RawMessage
	// Vars are further variables (date_string, enable_thinking, …).
	Vars map[string]any
	// Now is the time strftime_now formats (the current time when zero).
	Now time.Time
}

// Template is a parsed chat template; it is safe for concurrent use.
type Template struct {
	src string
	tpl *exec.Template
	// form is how its messages are written for it.
	form messageForm
}

// messageForm is how a template wants the parts of a message that OpenAI's API and templates
// write in more than one way. The choice is read off the template's text, as llama.cpp's
// server does: most templates concatenate content and fail on none (Python's Jinja and
// @huggingface/jinja refuse to add none to a string), and write a call's arguments with
// tojson, from an object.
type messageForm struct {
	// noneContent: a message without content has content none, because the template tests
	// for it (DeepSeek R1 writes tool calls only after "content is none"); otherwise "".
	noneContent bool
	// textArguments: a tool call's arguments stay the JSON text the client sent, because the
	// template adds them to a string (DeepSeek's); otherwise they are decoded to an object.
	textArguments bool
}

var (
	noneContentRE   = regexp.MustCompile(`(\.content|\[['"]content['"]\])\s+is\s+(not\s+)?none`)
	textArgumentsRE = regexp.MustCompile(`arguments['"]?\]?\s*\+`)
)

// Parse parses a chat template. A syntax error names its line when the library reports one.
func Parse(src string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("chat template: %v", r)
		}
	}()
	tpl, err := fromString(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return &Template{src: src, tpl: tpl, form: messageForm{noneContent: noneContentRE.MatchString(src), textArguments: textArgumentsRE.MatchString(src)}}, nil
}

// environment is gonja's default environment with tojson written as Hugging Face's is (see
// toJSON).
var environment = func() *exec.Environment {
	env := *gonja.DefaultEnvironment
	env.Filters = exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(gonja.DefaultEnvironment.Filters)
	for name, f := range map[string]exec.FilterFunction{"tojson": filterToJSON, "items": filterItems, "list": filterList} {
		if err := env.Filters.Replace(name, f); err != nil {
			panic(err)
		}
	}
	env.Methods.Dict = dictMethods()
	return &env
}()

// fromString parses a template in loom's environment (gonja.FromString, with environment).
func fromString(src string) (*exec.Template, error) {
	id := fmt.Sprintf("root-%x", sha256.Sum256([]byte(src)))
	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, err
	}
	shifted, err := loaders.NewShiftedLoader(id, bytes.NewReader([]byte(src)), loader)
	if err != nil {
		return nil, err
	}
	return exec.NewTemplate(id, gonja.DefaultConfig, shifted, environment)
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
	order := &keyOrder{keys: map[unsafe.Pointer][]string{}, form: t.form}
	messages := make(list, len(msgs))
	for i, m := range msgs {
		messages[i] = order.message(m)
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	var raised *errRaised
	data := map[string]any{
		"messages":              messages,
		"bos_token":             o.BOS,
		"eos_token":             o.EOS,
		"add_generation_prompt": o.AddGenerationPrompt,
		"raise_exception": func(msg string) (string, error) {
			raised = &errRaised{msg: msg}
			return "", raised
		},
		"strftime_now": func(format string) string { return strftime(now, format) },
	}
	if len(o.Tools) > 0 {
		tools := make(list, len(o.Tools))
		for i, raw := range o.Tools {
			v, err := order.decode(raw)
			if err != nil {
				return "", fmt.Errorf("chat template: tool %d is not JSON: %w", i, err)
			}
			tools[i] = v
		}
		data["tools"] = tools
	}
	for k, v := range o.Vars {
		data[k] = v
	}
	order.register()
	defer order.release()
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
