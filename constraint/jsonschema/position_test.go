package jsonschema_test

import (
	"errors"
	"testing"

	"github.com/loomlm/loom/constraint/jsonschema"
)

// TestErrorPositions checks that a schema error says where in the text the schema at fault,
// or the JSON syntax error, is: its line and column.
func TestErrorPositions(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		line, col int
	}{
		{"unknown type", "{\n  \"type\": \"strin\"\n}", 2, 11},
		{"a property's pattern", "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"a~b/c\": {\"type\": \"string\", \"pattern\": \"(\"}\n  }\n}", 4, 44},
		{"a definition", "{\"$defs\": {\"x\":\n  {\"minLength\": -1}}, \"$ref\": \"#/$defs/x\"}", 2, 17},
		{"syntax", "{\n  \"type\": }", 2, 11},
		{"truncated", "{\n  \"type\": \"string\"", 2, 19},
		{"the root accepts nothing", "\n  false", 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jsonschema.Compile([]byte(tt.src), jsonschema.Options{})
			var e *jsonschema.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want a *jsonschema.Error", err)
			}
			if e.Line != tt.line || e.Col != tt.col {
				t.Fatalf("%v: at %d:%d, want %d:%d", err, e.Line, e.Col, tt.line, tt.col)
			}
		})
	}
}

// TestPosition checks Position against values found by hand, escaped pointer tokens
// included, and that it refuses pointers to nothing.
func TestPosition(t *testing.T) {
	src := []byte("{\"a\": [1, {\"b/c\": true, \"d~e\": null}],\n \"\": \"x\"}")
	for _, tc := range []struct {
		ptr       string
		line, col int
		ok        bool
	}{
		{"", 1, 1, true},
		{"/a", 1, 7, true},
		{"/a/0", 1, 8, true},
		{"/a/1/b~1c", 1, 19, true},
		{"/a/1/d~0e", 1, 32, true},
		{"/", 2, 6, true},
		{"/a/2", 0, 0, false},
		{"/b", 0, 0, false},
		{"/a/x", 0, 0, false},
		{"a", 0, 0, false},
	} {
		line, col, ok := jsonschema.Position(src, tc.ptr)
		if line != tc.line || col != tc.col || ok != tc.ok {
			t.Errorf("Position(%q) = %d:%d %v, want %d:%d %v", tc.ptr, line, col, ok, tc.line, tc.col, tc.ok)
		}
	}
}
