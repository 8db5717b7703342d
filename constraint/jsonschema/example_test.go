package jsonschema_test

import (
	"errors"
	"fmt"

	"github.com/loomlm/loom/constraint/jsonschema"
)

// A schema that cannot be compiled is an *Error that names the JSON pointer of the schema at
// fault and where that schema is in the text.
func ExampleError() {
	schema := "{\n  \"type\": \"object\",\n  \"properties\": {\"age\": {\"minimum\": \"ten\"}}\n}"
	_, err := jsonschema.Compile([]byte(schema), jsonschema.Options{})
	var e *jsonschema.Error
	if errors.As(err, &e) {
		fmt.Printf("%d:%d: %v\n", e.Line, e.Col, err)
	}
	// Output: 3:37: json schema at /properties/age/minimum: must be a number
}

// Position finds the value at a JSON pointer in a JSON text.
func ExamplePosition() {
	doc := []byte("{\n  \"$defs\": {\n    \"a/b\": {\"type\": \"string\"}\n  }\n}")
	line, col, ok := jsonschema.Position(doc, "/$defs/a~1b/type")
	fmt.Println(line, col, ok)
	// Output: 3 21 true
}
