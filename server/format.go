package server

import (
	"encoding/json"
	"slices"

	"github.com/loomlm/loom/pipeline"
)

// responseFormat is the OpenAI response_format field: "text" (the default), "json_object"
// (any JSON object) or "json_schema" (JSON valid against json_schema.schema). The constraint
// is the first processor of the request's chain, so that processors which truncate the
// candidates choose among tokens the format allows.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		// Strict is accepted: loom always enforces the schema it compiles, and refuses one
		// it cannot enforce.
		Strict *bool `json:"strict"`
	} `json:"json_schema"`
}

// JSONObjectGrammar is the GBNF of response_format json_object: a JSON object, with at most
// one newline and 20 spaces or tabs of whitespace between tokens (so that a model cannot loop
// on whitespace).
const JSONObjectGrammar = `root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,4})? ws
ws     ::= [ \t]{0,20} ("\n" [ \t]{0,20})?
`

// validate checks the field, naming what is wrong.
func (f *responseFormat) validate() error {
	if f == nil {
		return nil
	}
	switch f.Type {
	case "text", "json_object":
		if f.JSONSchema != nil {
			return badParam("response_format.json_schema", "is only for type \"json_schema\", not %q", f.Type)
		}
	case "json_schema":
		if f.JSONSchema == nil {
			return badParam("response_format.json_schema", "is required with type \"json_schema\"")
		}
		s := f.JSONSchema.Schema
		if len(s) == 0 || string(s) == "null" {
			return badParam("response_format.json_schema.schema", "is required")
		}
		if !json.Valid(s) {
			return badParam("response_format.json_schema.schema", "is not valid JSON")
		}
	case "":
		return badParam("response_format.type", "is required (text, json_object or json_schema)")
	default:
		return badParam("response_format.type", "%q: must be text, json_object or json_schema", f.Type)
	}
	return nil
}

// apply puts the format's constraint first in spec's processors; think is its think
// parameter ("" for none).
func (f *responseFormat) apply(spec *pipeline.Spec, think string) {
	if f == nil {
		return
	}
	var ps pipeline.PartSpec
	switch f.Type {
	case "json_object":
		ps = pipeline.PartSpec{Type: "grammar", Params: map[string]any{"grammar": JSONObjectGrammar}, Path: "request field response_format"}
	case "json_schema":
		ps = pipeline.PartSpec{Type: "json_schema", Params: map[string]any{"schema": string(f.JSONSchema.Schema)}, Path: "request field response_format.json_schema.schema"}
	default:
		return
	}
	if think != "" {
		ps.Params["think"] = think
	}
	spec.Processors = slices.Insert(spec.Processors, 0, ps)
}
