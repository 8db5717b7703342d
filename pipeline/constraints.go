package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/jsonschema"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/reasoning"
	"github.com/loomlm/loom/toolcall"
)

// constraintParts lists the structured-output processors (see docs/structured.md), each with
// the parameter think (afterThinking).
func constraintParts() []*Part {
	parts := []*Part{
		{
			Kind: Processor, Type: "grammar",
			Doc: "Constrains the generated text to a GBNF grammar (llama.cpp's notation): bans every token that cannot continue a sentence, allows end of sequence only when the text is complete.",
			Params: []Param{
				{Name: "grammar", Type: String, Default: "", Doc: "the grammar, inline (give this or grammar_file)"},
				{Name: "grammar_file", Type: String, Default: "", Doc: "a GBNF file, relative to the pipeline file"},
				{Name: "start", Type: String, Default: "root", Doc: "the start rule"},
			},
			NewProcessor: newGrammarProcessor,
		},
		{
			Kind: Processor, Type: "regex",
			Doc: "Constrains the whole generated text to match a regular expression (Go regexp syntax; see docs/structured.md).",
			Params: []Param{
				{Name: "pattern", Type: String, Doc: "the regular expression"},
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				re := a.String("pattern")
				if a.Err() != nil {
					return nil, a.Err()
				}
				p, err := constraint.NewRegex(re)
				if err != nil {
					return nil, &core.ParamError{Param: "pattern", Reason: err.Error()}
				}
				return p, nil
			},
		},
		{
			Kind: Processor, Type: "json_schema",
			Doc: "Constrains the generated text to JSON valid against a JSON Schema (draft 2020-12; properties in the schema's order; unsupported keywords are errors — see docs/structured.md).",
			Params: []Param{
				{Name: "schema", Type: String, Default: "", Doc: "the schema as JSON text, inline (give this or schema_file)"},
				{Name: "schema_file", Type: String, Default: "", Doc: "a JSON Schema file, relative to the pipeline file"},
				{Name: "assert_format", Type: Bool, Default: true, Doc: "hold strings with a format (date, time, date-time, uuid, email, ipv4) to it; false treats format as an annotation"},
				{Name: "whitespace", Type: String, Default: "compact", Doc: "compact (no whitespace), space (at most one space between tokens, as json.dumps writes) or flexible (up to one newline and 20 blanks between tokens)"},
			},
			NewProcessor: newJSONSchemaProcessor,
		},
		{
			Kind: Processor, Type: "tool_calls",
			Doc: "Constrains the generated text to calls of tools (OpenAI's tools list), each call's arguments valid against its tool's JSON Schema, in the format a chat model writes them (see docs/serving.md, \"Tool calls\").",
			Params: []Param{
				{Name: "tools", Type: String, Default: "", Doc: "the tools as OpenAI's JSON array of {\"type\": \"function\", \"function\": {name, description, parameters}}, inline (give this or tools_file)"},
				{Name: "tools_file", Type: String, Default: "", Doc: "a JSON file of the tools array, relative to the pipeline file"},
				{Name: "format", Type: String, Default: "hermes", Doc: "hermes (<tool_call> tags: Qwen, Hermes, the plain template), llama3 (one JSON object: Llama 3.1–3.3) or mistral ([TOOL_CALLS] and an array of calls: Mistral v0.3, Nemo; the tokenizer must write [TOOL_CALLS] as text, as loom serve's does for such a model)"},
				{Name: "tool", Type: String, Default: "", Doc: "the one tool to call; empty: any of them"},
				{Name: "parallel", Type: Bool, Default: true, Doc: "allow several calls (hermes: one per line; mistral: in its array; not llama3)"},
				{Name: "lazy", Type: Bool, Default: false, Doc: "let the reply be any text until it opens a call (<tool_call>; llama3: a reply that begins with {; mistral: the [TOOL_CALLS] token, or its text where the vocabulary has no such token), and hold only the calls"},
			},
			NewProcessor: newToolCallsProcessor,
		},
		{
			Kind: Processor, Type: "choice",
			Doc: "Constrains the generated text to exactly one of a list of strings.",
			Params: []Param{
				{Name: "choices", Type: StringList, Doc: "the strings allowed (at least one)"},
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				choices := a.Strings("choices")
				if a.Err() != nil {
					return nil, a.Err()
				}
				if len(choices) == 0 {
					return nil, &core.ParamError{Param: "choices", Reason: "must list at least one string"}
				}
				return constraint.NewChoice(choices)
			},
		},
	}
	for _, p := range parts {
		p.Params = append(p.Params, thinkParam)
		p.NewProcessor = afterThinking(p.NewProcessor)
	}
	return parts
}

// thinkParam lets a constraint wait out a reasoning model's thinking block.
var thinkParam = Param{Name: "think", Type: String, Default: "none", Doc: "a reasoning model's thinking block (<think>…</think>) before the constrained text: none, start (the reply may begin with one) or open (the prompt opened one, so the reply begins inside it); the block is free text and the constraint holds the answer after it"}

// afterThinking wraps a constraint's constructor with the parameter think: a constraint of
// the whole reply holds the answer after the block (constraint.AfterThinking), a lazy one
// looks for its trigger only in the answer (constraint.Lazy.SkipThinking).
func afterThinking(newProcessor func(*Args) (core.LogitsProcessor, error)) func(*Args) (core.LogitsProcessor, error) {
	return func(a *Args) (core.LogitsProcessor, error) {
		think := a.String("think")
		if a.Err() != nil {
			return nil, a.Err()
		}
		if think != "none" && think != "start" && think != "open" {
			return nil, &core.ParamError{Param: "think", Value: think, Reason: "must be none, start or open"}
		}
		p, err := newProcessor(a)
		if err != nil || think == "none" {
			return p, err
		}
		open := think == "open"
		switch c := p.(type) {
		case *constraint.Processor:
			return constraint.NewAfterThinking(c, reasoning.Think, open), nil
		case *constraint.Lazy:
			return c.SkipThinking(reasoning.Think, open), nil
		}
		return nil, &core.ParamError{Param: "think", Value: think, Reason: fmt.Sprintf("%T does not wait for thinking", p)}
	}
}

func newGrammarProcessor(a *Args) (core.LogitsProcessor, error) {
	src, file := a.String("grammar"), a.String("grammar_file")
	start := a.String("start")
	if a.Err() != nil {
		return nil, a.Err()
	}
	param := "grammar"
	switch {
	case src != "" && file != "":
		return nil, &core.ParamError{Param: "grammar_file", Reason: "give either grammar or grammar_file, not both"}
	case file != "":
		param = "grammar_file"
		path, b, err := readParamFile(a, param, file)
		if err != nil {
			return nil, err
		}
		src = string(b)
		cfg, err := compileGBNF(src, start)
		if err == nil {
			return constraint.New("grammar", cfg), nil
		}
		return nil, &core.ParamError{Param: param, Reason: fmt.Sprintf("%s:%v", path, err)}
	case src == "":
		return nil, &core.ParamError{Param: "grammar", Reason: "missing: give grammar (inline GBNF) or grammar_file"}
	}
	cfg, err := compileGBNF(src, start)
	if err == nil {
		return constraint.New("grammar", cfg), nil
	}
	var ge *grammar.Error
	if errors.As(err, &ge) && ge.Pos.Line > 0 {
		return nil, &valueError{param: param, line: ge.Pos.Line, col: ge.Pos.Col, msg: ge.Msg}
	}
	return nil, &core.ParamError{Param: param, Reason: fmt.Sprintf("grammar: %v", err)}
}

// valueError is an error at a line and column inside a string parameter's value (an inline
// grammar or schema), which the build places at that point of the pipeline file.
type valueError struct {
	param     string
	line, col int // 1-based, inside the value
	msg       string
}

func (e *valueError) Error() string {
	return fmt.Sprintf("%s: %d:%d: %s", e.param, e.line, e.col, e.msg)
}

func newJSONSchemaProcessor(a *Args) (core.LogitsProcessor, error) {
	src, file := a.String("schema"), a.String("schema_file")
	opt := jsonschema.Options{FormatAnnotation: !a.Bool("assert_format")}
	switch ws := a.String("whitespace"); ws {
	case "compact":
	case "space":
		opt.OneSpace = true
	case "flexible":
		opt.FlexibleWhitespace = true
	default:
		if a.Err() == nil {
			return nil, &core.ParamError{Param: "whitespace", Value: ws, Reason: "must be compact, space or flexible"}
		}
	}
	if a.Err() != nil {
		return nil, a.Err()
	}
	param, path := "schema", "" // path: the schema file's
	switch {
	case src != "" && file != "":
		return nil, &core.ParamError{Param: "schema_file", Reason: "give either schema or schema_file, not both"}
	case file != "":
		param = "schema_file"
		var b []byte
		var err error
		if path, b, err = readParamFile(a, param, file); err != nil {
			return nil, err
		}
		src = string(b)
	case src == "":
		return nil, &core.ParamError{Param: "schema", Reason: "missing: give schema (JSON text) or schema_file"}
	}
	cfg, err := compileJSONSchema(src, opt)
	if err == nil {
		return constraint.New("json_schema", cfg), nil
	}
	var se *jsonschema.Error
	switch positioned := errors.As(err, &se) && se.Line > 0; {
	case path == "" && positioned:
		return nil, &valueError{param: param, line: se.Line, col: se.Col, msg: err.Error()}
	case path == "":
		return nil, &core.ParamError{Param: param, Reason: err.Error()}
	case positioned:
		return nil, &core.ParamError{Param: param, Reason: fmt.Sprintf("%s:%d:%d: %v", path, se.Line, se.Col, err)}
	default:
		return nil, &core.ParamError{Param: param, Reason: fmt.Sprintf("%s: %v", path, err)}
	}
}

func newToolCallsProcessor(a *Args) (core.LogitsProcessor, error) {
	src, file, formatName, only, parallel, lazy := a.String("tools"), a.String("tools_file"), a.String("format"), a.String("tool"), a.Bool("parallel"), a.Bool("lazy")
	if a.Err() != nil {
		return nil, a.Err()
	}
	format, err := toolcall.ParseFormat(formatName)
	if err != nil {
		return nil, &core.ParamError{Param: "format", Reason: err.Error()}
	}
	param, where := "tools", ""
	switch {
	case src != "" && file != "":
		return nil, &core.ParamError{Param: "tools_file", Reason: "give either tools or tools_file, not both"}
	case file != "":
		param = "tools_file"
		path, b, err := readParamFile(a, param, file)
		if err != nil {
			return nil, err
		}
		src, where = string(b), path+": "
	case src == "":
		return nil, &core.ParamError{Param: "tools", Reason: "missing: give tools (a JSON array) or tools_file"}
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(src), &raw); err != nil {
		return nil, &core.ParamError{Param: param, Reason: where + "not a JSON array of tools: " + err.Error()}
	}
	tools, err := toolcall.ParseTools(raw)
	if err == nil {
		var cfg *grammar.CFG
		if cfg, err = format.Compile(tools, only, parallel); err == nil {
			p := constraint.New("tool_calls", cfg)
			if lazy {
				l := constraint.NewLazy(p, format.Opener(), format == toolcall.Llama3)
				if id, ok := controlTextToken(a.Env, format.ControlText()); ok {
					l.TriggerToken(id) // only the token opens calls, not prose spelling it
				}
				return l, nil
			}
			return p, nil
		}
	}
	var fe *toolcall.FieldError
	if errors.As(err, &fe) && fe.Field == "tool" {
		return nil, &core.ParamError{Param: "tool", Value: only, Reason: fe.Msg}
	}
	return nil, &core.ParamError{Param: param, Reason: where + err.Error()}
}

// controlTextToken finds the token of a format's control text (Mistral's [TOOL_CALLS]) in the
// pipeline's vocabulary, where the tokenizer writes it as that text.
func controlTextToken(env *Env, texts []string) (core.TokenID, bool) {
	if env == nil || env.Tokenizer == nil || len(texts) == 0 {
		return -1, false
	}
	byText, ok := env.Tokenizer.(interface {
		ID(piece string) (core.TokenID, bool)
	})
	if !ok {
		return -1, false
	}
	id, ok := byText.ID(texts[0])
	return id, ok && string(env.Tokenizer.TokenBytes(id)) == texts[0]
}

// maxParamFileBytes bounds the files that parameters name (JSON Schemas, grammars): a larger
// file is refused before it is read, and no more is read of a stream (a pipe; a device such
// as /dev/zero, which never ends).
const maxParamFileBytes = 16 << 20

// readParamFile reads the file a parameter names, relative to the pipeline file's directory.
// It returns the path it read (for errors in the file's text) and the file's bytes.
func readParamFile(a *Args, param, file string) (path string, data []byte, err error) {
	path = file
	if !filepath.IsAbs(path) && a.Env.Dir != "" {
		path = filepath.Join(a.Env.Dir, path)
	}
	data, err = readBounded(path, maxParamFileBytes, "a schema or grammar file")
	if err != nil {
		return "", nil, &core.ParamError{Param: param, Value: file, Reason: err.Error()}
	}
	return path, data, nil
}
