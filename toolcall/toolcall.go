// Package toolcall writes and reads the tool calls of chat models (OpenAI's "tools" and
// "tool_calls"): which format a model's chat template asks its replies to call tools in, the
// grammar that holds a reply to well-formed calls of the given tools (each call's arguments
// valid against its tool's JSON Schema, through package constraint/jsonschema), and the
// parser that finds the calls in a reply.
//
// Three formats are known:
//
//   - Hermes, the format of Qwen2.5, Qwen3, Hermes and loom's plain template: each call is
//     <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>, calls one per line, after
//     any text.
//   - Llama3, the JSON of Llama 3.1, 3.2 and 3.3's templates: the whole reply is one object
//     {"name": NAME, "parameters": {...}}.
//   - Mistral, the format of Mistral v0.3, Nemo and their kin: after any text, [TOOL_CALLS]
//     then a JSON array of {"name": NAME, "arguments": {...}} objects, each with an optional
//     "id" of nine letters and digits (Nemo's). [TOOL_CALLS] is a control token in Mistral's
//     vocabularies, which writes no text; a server reads such a model's replies with a
//     tokenizer that writes its text (see ControlText).
//
// Formats whose calls are written in other special tokens (DeepSeek's) are not read: Detect
// reports that a template has no format loom knows, and a server refuses tools for such a
// model rather than guess.
package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/jsonschema"
)

// Tool is one function a model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the call's arguments (an object with no properties
	// when the tool gave none).
	Parameters json.RawMessage
	// Strict is OpenAI's strict: the schema's "format" keywords are asserted (a format loom
	// does not know is an error, as with response_format); otherwise "format" is an
	// annotation, as JSON Schema draft 2020-12 has it by default (APIs' tools write formats
	// such as "uri" that describe more than they constrain).
	Strict bool
}

// Call is one call of a tool in a reply.
type Call struct {
	Name string
	// Arguments is the JSON text of the arguments object, as the model wrote it.
	Arguments string
	// ID is the call's id where the format writes one (Mistral's, when the reply gave it).
	ID string
}

// MaxTools is the most tools one request may declare.
const MaxTools = 128

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// noParameters is the schema of a tool that declares no parameters: an empty object.
var noParameters = json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`)

// ParseTools reads OpenAI's tools list: each {"type": "function", "function": {"name",
// "description", "parameters", "strict"}}. An error names the field at fault as
// tools[i].function.name and so on.
func ParseTools(raw []json.RawMessage) ([]Tool, error) {
	if len(raw) > MaxTools {
		return nil, &FieldError{Field: "tools", Msg: fmt.Sprintf("%d tools: at most %d", len(raw), MaxTools)}
	}
	tools := make([]Tool, len(raw))
	seen := map[string]int{}
	for i, r := range raw {
		at := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type     *string `json:"type"`
			Function *struct {
				Name        *string         `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      *bool           `json:"strict"`
			} `json:"function"`
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return nil, &FieldError{Field: at, Msg: "must be {\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}: " + err.Error()}
		}
		switch {
		case t.Type == nil:
			return nil, &FieldError{Field: at + ".type", Msg: `missing: must be "function"`}
		case *t.Type != "function":
			return nil, &FieldError{Field: at + ".type", Msg: fmt.Sprintf(`%q: must be "function"`, *t.Type)}
		case t.Function == nil:
			return nil, &FieldError{Field: at + ".function", Msg: "missing"}
		case t.Function.Name == nil:
			return nil, &FieldError{Field: at + ".function.name", Msg: "missing"}
		case !nameRE.MatchString(*t.Function.Name):
			return nil, &FieldError{Field: at + ".function.name", Msg: fmt.Sprintf("%q: must be 1 to 64 letters, digits, underscores or dashes", *t.Function.Name)}
		}
		name := *t.Function.Name
		if j, dup := seen[name]; dup {
			return nil, &FieldError{Field: at + ".function.name", Msg: fmt.Sprintf("%q is also the name of tools[%d]", name, j)}
		}
		seen[name] = i
		params := t.Function.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = noParameters
		} else if !json.Valid(params) {
			return nil, &FieldError{Field: at + ".function.parameters", Msg: "is not valid JSON"}
		}
		tools[i] = Tool{Name: name, Description: t.Function.Description, Parameters: params, Strict: t.Function.Strict != nil && *t.Function.Strict}
	}
	return tools, nil
}

// FieldError is a fault in a request's tools, naming the field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Format is a way of writing tool calls in a reply.
type Format int

// The formats loom reads and writes.
const (
	Hermes Format = iota
	Llama3
	Mistral
)

// String names the format.
func (f Format) String() string {
	switch f {
	case Llama3:
		return "llama3"
	case Mistral:
		return "mistral"
	}
	return "hermes"
}

// ParseFormat reads a format's name.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "hermes":
		return Hermes, nil
	case "llama3":
		return Llama3, nil
	case "mistral":
		return Mistral, nil
	}
	return 0, fmt.Errorf("%q: the tool-call formats are hermes, llama3 and mistral", s)
}

// Detect finds the format a chat template asks for, from its text: Hermes where it writes
// <tool_call> tags, Llama3 where it has Llama 3's ipython role. ok is false for a template
// that writes no format loom knows (or no tool calls at all).
func Detect(template string) (f Format, ok bool) {
	switch {
	case strings.Contains(template, "<tool_call>"):
		return Hermes, true
	case strings.Contains(template, "ipython") && strings.Contains(template, `"parameters"`):
		return Llama3, true
	case strings.Contains(template, mistralOpen) && !strings.Contains(template, "[ARGS]"):
		// (Mistral's later templates write [TOOL_CALLS]name[ARGS]{…}, another format)
		return Mistral, true
	}
	return 0, false
}

// mistralOpen is the control token that opens Mistral's calls; ControlText lists it.
const mistralOpen = "[TOOL_CALLS]"

// ControlText lists the control tokens whose text a format's replies must show to be read:
// a server decodes them as text for a model whose template writes calls in this format.
func (f Format) ControlText() []string {
	if f == Mistral {
		return []string{mistralOpen}
	}
	return nil
}

const (
	hermesOpen  = "<tool_call>\n"
	hermesClose = "\n</tool_call>"
)

// Write writes calls as a reply in this format (Llama3 writes the first call only: its
// replies hold one).
func (f Format) Write(calls []Call) string {
	var b strings.Builder
	if f == Mistral {
		b.WriteString(mistralOpen + "[")
	}
	for i, c := range calls {
		name, _ := json.Marshal(c.Name)
		if f == Mistral {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"name": %s, "arguments": %s`, name, c.Arguments)
			if c.ID != "" {
				id, _ := json.Marshal(c.ID)
				fmt.Fprintf(&b, `, "id": %s`, id)
			}
			b.WriteString("}")
			continue
		}
		if f == Llama3 {
			fmt.Fprintf(&b, `{"name": %s, "parameters": %s}`, name, c.Arguments)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, `%s{"name": %s, "arguments": %s}%s`, hermesOpen, name, c.Arguments, hermesClose)
	}
	if f == Mistral {
		b.WriteString("]")
	}
	return b.String()
}

// Grammar returns the grammar of a reply that calls tools in this format and says nothing
// else: a call of only (any of the tools when only is ""), or with parallel (Hermes and
// Mistral) one or more calls, one per line (Hermes) or in Mistral's array. Each call's arguments are JSON valid against its tool's
// parameters, as package jsonschema writes it; an error names the tool whose schema does not
// compile (tools[i].function.parameters).
func (f Format) Grammar(tools []Tool, only string, parallel bool) (*grammar.Grammar, error) {
	args := "arguments"
	if f == Llama3 {
		args, parallel = "parameters", false
	}
	g := &grammar.Grammar{}
	alt := &grammar.Alt{}
	for i, t := range tools {
		if only != "" && t.Name != only {
			continue
		}
		// One space where JSON allows blanks: calls as the templates write them and the
		// models write them back ({"city": "Oslo"}), compact JSON too, and no room to spin.
		sub, err := jsonschema.Translate(t.Parameters, jsonschema.Options{FormatAnnotation: !t.Strict, OneSpace: true})
		if err != nil {
			return nil, &FieldError{Field: fmt.Sprintf("tools[%d].function.parameters", i), Msg: err.Error()}
		}
		prefix := fmt.Sprintf("tool%d-", i)
		for _, r := range sub.Rules {
			g.Rules = append(g.Rules, grammar.Rule{Name: prefix + r.Name, Body: renamed(r.Body, prefix), Pos: r.Pos})
		}
		for _, group := range sub.RegularGroups {
			names := make([]string, len(group))
			for j, n := range group {
				names[j] = prefix + n
			}
			g.RegularGroups = append(g.RegularGroups, names)
		}
		name, _ := json.Marshal(t.Name)
		alt.Alts = append(alt.Alts, &grammar.Seq{Items: []grammar.Expr{
			&grammar.Literal{Text: fmt.Sprintf(`%s, "%s": `, name, args)},
			&grammar.Ref{Name: prefix + "root"},
		}})
	}
	switch {
	case len(tools) == 0:
		return nil, &FieldError{Field: "tools", Msg: "no tools to call"}
	case len(alt.Alts) == 0:
		return nil, &FieldError{Field: "tool", Msg: fmt.Sprintf("%q is not one of the tools", only)}
	}
	end := grammar.Expr(&grammar.Literal{Text: "}"})
	if f == Mistral { // an optional id of nine letters and digits (Nemo's)
		alnum := &grammar.Class{Ranges: []grammar.RuneRange{{Lo: '0', Hi: '9'}, {Lo: 'A', Hi: 'Z'}, {Lo: 'a', Hi: 'z'}}}
		id := &grammar.Seq{Items: []grammar.Expr{&grammar.Literal{Text: `, "id": "`}, &grammar.Repeat{Expr: alnum, Min: 9, Max: 9}, &grammar.Literal{Text: `"`}}}
		end = &grammar.Seq{Items: []grammar.Expr{&grammar.Repeat{Expr: id, Min: 0, Max: 1}, end}}
	}
	var call grammar.Expr = &grammar.Seq{Items: []grammar.Expr{&grammar.Literal{Text: `{"name": `}, alt, end}}
	if f == Hermes {
		call = &grammar.Seq{Items: []grammar.Expr{&grammar.Literal{Text: hermesOpen}, call, &grammar.Literal{Text: hermesClose}}}
	}
	g.Rules = append(g.Rules, grammar.Rule{Name: "tool-call", Body: call})
	var root grammar.Expr = &grammar.Ref{Name: "tool-call"}
	sep := "\n"
	if f == Mistral {
		sep = ", "
	}
	if parallel {
		root = &grammar.Seq{Items: []grammar.Expr{root, &grammar.Repeat{Expr: &grammar.Seq{Items: []grammar.Expr{&grammar.Literal{Text: sep}, &grammar.Ref{Name: "tool-call"}}}, Min: 0, Max: -1}}}
	}
	if f == Mistral { // v0.3 writes a space after the token, Nemo none
		root = &grammar.Seq{Items: []grammar.Expr{&grammar.Literal{Text: mistralOpen}, &grammar.Repeat{Expr: &grammar.Literal{Text: " "}, Min: 0, Max: 1}, &grammar.Literal{Text: "["}, root, &grammar.Literal{Text: "]"}}}
	}
	g.Rules = append(g.Rules, grammar.Rule{Name: "root", Body: root})
	return g, nil
}

// renamed returns e with every rule it refers to prefixed.
func renamed(e grammar.Expr, prefix string) grammar.Expr {
	switch t := e.(type) {
	case *grammar.Alt:
		out := &grammar.Alt{Alts: make([]grammar.Expr, len(t.Alts))}
		for i, a := range t.Alts {
			out.Alts[i] = renamed(a, prefix)
		}
		return out
	case *grammar.Seq:
		out := &grammar.Seq{Items: make([]grammar.Expr, len(t.Items))}
		for i, a := range t.Items {
			out.Items[i] = renamed(a, prefix)
		}
		return out
	case *grammar.Repeat:
		return &grammar.Repeat{Expr: renamed(t.Expr, prefix), Min: t.Min, Max: t.Max}
	case *grammar.Ref:
		return &grammar.Ref{Name: prefix + t.Name, Pos: t.Pos}
	}
	return e // literals and classes
}

// Opener is the text that starts a call in this format ("{" for Llama3, whose reply is the
// call): a streaming reply holds back text that may be its start.
func (f Format) Opener() string {
	switch f {
	case Llama3:
		return "{"
	case Mistral:
		return mistralOpen
	}
	return strings.TrimSuffix(hermesOpen, "\n")
}

// Parse finds the calls in a reply: content is the text before the first call (trailing
// whitespace removed), calls the calls in order. A reply whose calls are not all well formed
// calls of the given tools (unknown name, arguments not a JSON object, a call not closed) has
// no calls: its whole text is content.
func (f Format) Parse(reply string, tools []Tool) (content string, calls []Call) {
	known := map[string]bool{}
	for _, t := range tools {
		known[t.Name] = true
	}
	if f == Llama3 {
		text := strings.TrimSpace(reply)
		if !strings.HasPrefix(text, "{") {
			return reply, nil
		}
		c, rest, ok := parseCall(text, "parameters", known)
		if !ok || strings.TrimSpace(rest) != "" {
			return reply, nil
		}
		return "", []Call{c}
	}
	if f == Mistral {
		return parseMistral(reply, known)
	}
	open := f.Opener()
	i := strings.Index(reply, open)
	if i < 0 {
		return reply, nil
	}
	content = strings.TrimRight(reply[:i], " \t\r\n")
	rest := reply[i:]
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest == "" {
			break
		}
		if !strings.HasPrefix(rest, open) {
			return reply, nil // text after a call
		}
		body, after, ok := strings.Cut(rest[len(open):], "</tool_call>")
		if !ok {
			return reply, nil
		}
		c, left, ok := parseCall(strings.TrimSpace(body), "arguments", known)
		if !ok || strings.TrimSpace(left) != "" {
			return reply, nil
		}
		calls = append(calls, c)
		rest = after
	}
	return content, calls
}

// parseMistral reads a reply in Mistral's format: text, then [TOOL_CALLS] and the array of
// calls, nothing after it. The calls are those of the first [TOOL_CALLS] that opens such an
// array (text may write the marker before, as the lazy constraint lets it).
func parseMistral(reply string, known map[string]bool) (string, []Call) {
	for from := 0; ; {
		i := strings.Index(reply[from:], mistralOpen)
		if i < 0 {
			return reply, nil
		}
		i += from
		if calls, ok := mistralCalls(reply[i+len(mistralOpen):], known); ok {
			return strings.TrimRight(reply[:i], " \t\r\n"), calls
		}
		from = i + 1
	}
}

// mistralCalls reads the array of calls that ends a reply after [TOOL_CALLS].
func mistralCalls(text string, known map[string]bool) ([]Call, bool) {
	var list []map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&list); err != nil || len(list) == 0 || strings.TrimSpace(text[dec.InputOffset():]) != "" {
		return nil, false
	}
	var calls []Call
	for _, obj := range list {
		var c Call
		if err := json.Unmarshal(obj["name"], &c.Name); err != nil || !known[c.Name] {
			return nil, false
		}
		a := bytes.TrimSpace(obj["arguments"])
		if len(a) == 0 || a[0] != '{' {
			return nil, false
		}
		c.Arguments = string(a)
		fields := 2
		if raw, ok := obj["id"]; ok {
			if json.Unmarshal(raw, &c.ID) != nil || !mistralIDRE.MatchString(c.ID) {
				return nil, false
			}
			fields++
		}
		if len(obj) != fields {
			return nil, false // fields beyond name, arguments and id
		}
		calls = append(calls, c)
	}
	return calls, true
}

// mistralIDRE is a Mistral call id: nine letters and digits.
var mistralIDRE = regexp.MustCompile(`^[A-Za-z0-9]{9}$`)

// parseCall reads one {"name": …, args: {…}} object at the start of text and returns what
// follows it. The arguments may also be under "arguments" in Llama3's replies and
// "parameters" in Hermes' (models write both).
func parseCall(text, args string, known map[string]bool) (Call, string, bool) {
	dec := json.NewDecoder(strings.NewReader(text))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return Call{}, "", false
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || !known[name] {
		return Call{}, "", false
	}
	a, ok := obj[args]
	if !ok {
		other := map[string]string{"arguments": "parameters", "parameters": "arguments"}[args]
		a, ok = obj[other]
	}
	if !ok || len(obj) != 2 {
		return Call{}, "", false
	}
	a = bytes.TrimSpace(a)
	if len(a) == 0 || a[0] != '{' {
		return Call{}, "", false
	}
	return Call{Name: name, Arguments: string(a)}, text[dec.InputOffset():], true
}

// Signature writes the tool as a short call signature: its name and the names of its
// parameters' top-level properties in the schema's order, "?" after those not required, as in
// get_weather(city, unit?). A schema without listed properties gives name().
func (t Tool) Signature() string {
	var schema struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	_ = json.Unmarshal(t.Parameters, &schema)
	required := map[string]bool{}
	for _, r := range schema.Required {
		required[r] = true
	}
	var names []string
	dec := json.NewDecoder(bytes.NewReader(schema.Properties))
	if tok, err := dec.Token(); err == nil && tok == json.Delim('{') {
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			name, _ := tok.(string)
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				break
			}
			if !required[name] {
				name += "?"
			}
			names = append(names, name)
		}
	}
	return t.Name + "(" + strings.Join(names, ", ") + ")"
}
