// Package apitools reads constraint/testdata/api-schemas.json — 57 JSON Schemas of the kind
// APIs ask for, each with a valid instance — as the tools of one request and a call of each,
// for the tests and benchmarks of tool calls.
package apitools

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/loomlm/loom/constraint/jsonschema"
	"github.com/loomlm/loom/toolcall"
)

// Load reads the file at path: the tools as OpenAI's tools list (named t<i>_<name>, the file's
// names repeating) and a call of each with its valid instance, written as the tool-call
// grammar writes arguments (jsonschema.Marshal of jsonschema.Order).
func Load(path string) (tools []json.RawMessage, calls []toolcall.Call, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var cases []struct {
		Name     string
		Schema   json.RawMessage
		Instance json.RawMessage
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, c := range cases {
		name := fmt.Sprintf("t%d_%s", i, c.Name)
		tools = append(tools, json.RawMessage(fmt.Sprintf(`{"type": "function", "function": {"name": %q, "parameters": %s}}`, name, c.Schema)))
		schema, err := jsonschema.Decode(c.Schema)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: schema %d: %w", path, i, err)
		}
		doc, err := jsonschema.Decode(c.Instance)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: instance %d: %w", path, i, err)
		}
		args, err := jsonschema.Marshal(jsonschema.Order(schema, doc))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: instance %d: %w", path, i, err)
		}
		calls = append(calls, toolcall.Call{Name: name, Arguments: string(args)})
	}
	return tools, calls, nil
}
