package constraint

import (
	"fmt"

	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/jsonschema"
	"github.com/loomlm/loom/constraint/regex"
)

// NewChoice returns a processor named "choice" that constrains the output to exactly one of
// choices (as bytes; the list must not be empty).
func NewChoice(choices []string) (*Processor, error) {
	if len(choices) == 0 {
		return nil, fmt.Errorf("choice: the list of choices is empty")
	}
	alt := &grammar.Alt{}
	for _, c := range choices {
		alt.Alts = append(alt.Alts, &grammar.Literal{Text: c})
	}
	g := &grammar.Grammar{Rules: []grammar.Rule{{Name: "root", Body: alt, Pos: grammar.Pos{Line: 1, Col: 1}}}}
	cfg, err := grammar.Compile(g, "root")
	if err != nil {
		return nil, fmt.Errorf("choice: %w", err)
	}
	return New("choice", cfg), nil
}

// NewRegex returns a processor named "regex" that constrains the whole output to match re
// (Go's regexp syntax; see package regex for what is supported).
func NewRegex(re string) (*Processor, error) {
	cfg, err := regex.Compile(re)
	if err != nil {
		return nil, err
	}
	return New("regex", cfg), nil
}

// NewJSONSchema returns a processor named "json_schema" that constrains the output to JSON
// valid against schema (JSON Schema draft 2020-12; see package jsonschema for what is
// supported and the form the JSON is written in).
func NewJSONSchema(schema []byte, opt jsonschema.Options) (*Processor, error) {
	cfg, err := jsonschema.Compile(schema, opt)
	if err != nil {
		return nil, err
	}
	return New("json_schema", cfg), nil
}
