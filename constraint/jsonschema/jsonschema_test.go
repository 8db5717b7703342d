package jsonschema_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/jsonschema"
)

func TestCompileAcceptsAndRejects(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		accept       []string
		reject       []string
	}{
		{"unevaluatedProperties", `{"type": "object", "allOf": [{"properties": {"a": {"type": "integer"}}}], "properties": {"b": {"type": "boolean"}}, "unevaluatedProperties": false}`,
			[]string{`{"b":true,"a":1}`, `{"a":1}`, `{}`},
			[]string{`{"b":true,"c":1}`, `{"c":null}`}},
		{"not a type", `{"not": {"type": ["string", "null"]}}`,
			[]string{"1", "-2.5", "true", "{}", "[]"},
			[]string{`"x"`, "null"}},
		{"two references to a false schema", `{"type": "object", "properties": {"a": {"$ref": "#/$defs/no"}, "b": {"$ref": "#/$defs/no"}}, "$defs": {"no": false}}`,
			[]string{`{}`}, []string{`{"a":1}`, `{"b":1}`}},
		{"double negation", `{"type": "integer", "not": {"not": {"minimum": 3}}}`,
			[]string{"3", "40"},
			[]string{"2", "-1", `"3"`}},
		{"integer range", `{"type": "integer", "minimum": -12, "maximum": 305}`,
			[]string{"-12", "-1", "0", "7", "99", "100", "305"},
			[]string{"-13", "306", "1000", "01", "-0", "3.5", `"3"`}},
		{"exclusive bounds", `{"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}`,
			[]string{"1", "9"}, []string{"0", "10", "-1"}},
		{"unbounded above", `{"type": "integer", "minimum": 18}`,
			[]string{"18", "19", "99", "100", "123456789"}, []string{"17", "9", "-18"}},
		{"non-negative number", `{"type": "number", "minimum": 0}`,
			[]string{"0", "0.5", "12.25", "1e3"}, []string{"-1", "-0.5"}},
		{"string lengths", `{"type": "string", "minLength": 2, "maxLength": 3}`,
			[]string{`"ab"`, `"abc"`, `"\n\t"`}, []string{`"a"`, `"abcd"`, `ab`}},
		{"pattern, unanchored", `{"type": "string", "pattern": "[0-9]{3}"}`,
			[]string{`"123"`, `"ab123cd"`}, []string{`"12"`, `"abc"`}},
		{"pattern, anchored", `{"type": "string", "pattern": "^a\"b$"}`,
			[]string{`"a\"b"`}, []string{`"a\"bc"`, `"xa\"b"`, `"a"b"`}},
		{"format date-time", `{"type": "string", "format": "date-time"}`,
			[]string{`"2026-11-24T22:41:00Z"`, `"2026-01-31T00:00:00.123+01:00"`}, []string{`"2026-13-01T00:00:00Z"`, `"yesterday"`}},
		{"enum", `{"enum": ["red", 1.0, null, {"a": [1]}]}`,
			[]string{`"red"`, "1", "null", `{"a":[1]}`}, []string{`"blue"`, "1.0", `{"a":[2]}`}},
		{"object in order, optional keys", `{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["b"], "additionalProperties": false}`,
			[]string{`{"b":"x"}`, `{"a":1,"b":"x"}`, `{"a":1,"b":"x","c":true}`, `{"b":"x","c":false}`, `{ "a": 1, "b": "x" }`},
			[]string{`{}`, `{"a":1}`, `{"b":"x","d":1}`, `{"b":"x","a":1}`, `{"a":1,,"b":"x"}`}},
		{"other properties are the unlisted ones", `{"properties": {"id": {"type": "integer"}}, "additionalProperties": {"type": "string"}}`,
			[]string{`{"id":1,"name":"x"}`, `{"idx":"y"}`, `{"i":"y"}`, `{}`},
			[]string{`{"id":"1"}`, `{"id":1,"id":2}`, `{"name":3}`}},
		{"arrays", `{"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}`,
			[]string{`["a",1]`, `["a",1,2]`}, []string{`[]`, `["a"]`, `["a",1,2,3]`, `[1,2]`}},
		{"recursive $ref", `{"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"], "additionalProperties": false}}, "$ref": "#/$defs/node"}`,
			[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":null}}`}, []string{`{"v":1}`, `{"v":1,"next":{"v":2}}`}},
		{"patternProperties and additionalProperties", `{"type": "object", "properties": {"id": {"type": "integer"}}, "patternProperties": {"^x-": {"type": "string"}, "[0-9]$": {"type": "boolean"}}, "additionalProperties": false}`,
			[]string{`{"id":1,"x-a":"s","b2":true}`, `{"x-b":"s"}`, `{"x-\n":"s"}`, `{}`},
			[]string{`{"x-1":true}`, `{"x-1":"s"}`, `{"x-a":1}`, `{"b2":"s"}`, `{"other":1}`, `{"id":"1"}`, `{"x":"s"}`}},
		{"a listed property matched by a pattern", `{"properties": {"a1": {"minimum": 3}}, "patternProperties": {"[0-9]": {"type": "integer"}}}`,
			[]string{`{"a1":3}`, `{"a1":4,"b":"x"}`}, []string{`{"a1":2}`, `{"a1":3.5}`, `{"a1":"s"}`}},
		{"propertyNames", `{"propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}, "additionalProperties": {"type": "number"}}`,
			[]string{`{"ab":1,"xyz":2.5}`, `{}`, `3`}, []string{`{"abcd":1}`, `{"A":1}`, `{"":1}`, `{"ab":"x"}`}},
		{"propertyNames enum", `{"type": "object", "properties": {"b": {"type": "integer"}}, "propertyNames": {"enum": ["a", "c"]}}`,
			[]string{`{"a":1,"c":[]}`, `{}`}, []string{`{"b":1}`, `{"d":1}`, `{"ab":1}`}},
		{"if/then/else", `{"if": {"type": "integer", "minimum": 10}, "then": {"maximum": 20}, "else": {"type": "string"}}`,
			[]string{"10", "20", `"a"`}, []string{"21", "9", "3.5", "null", "[]"}},
		{"if on a property", `{"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}, "required": ["kind"], "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}, "else": {"required": ["y"]}}`,
			[]string{`{"kind":"a","x":1}`, `{"kind":"b","y":1}`, `{"kind":"a","x":1,"y":2}`}, []string{`{"kind":"a","y":1}`, `{"kind":"b","x":1}`, `{"kind":"c","y":1}`}},
		{"not of string keywords", `{"not": {"type": "string", "pattern": "^a", "maxLength": 3}}`,
			[]string{`"b"`, `"abcd"`, `""`, "1", "null"}, []string{`"a"`, `"abc"`}},
		{"not of an enum", `{"type": ["number", "string", "boolean"], "not": {"enum": [1, 2.5, "x", true]}}`,
			[]string{"0", "3", "1.5", "2.25", `"y"`, "false"}, []string{"1", "2.5", `"x"`, "true", "null"}},
		{"not of required", `{"type": "object", "not": {"required": ["a"]}}`,
			[]string{`{}`, `{"b":1}`}, []string{`{"a":1}`, `{"b":1,"a":1}`}},
		{"pattern with lengths and format", `{"type": "string", "pattern": "^2026", "format": "date", "maxLength": 10}`,
			[]string{`"2026-01-31"`}, []string{`"2025-01-31"`, `"2026-13-01"`, `"2026"`}},
		{"contains", `{"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}, "minContains": 2}`,
			[]string{`[5,6]`, `[1,5,2,7,3]`, `[9,9,9]`}, []string{`[]`, `[5]`, `[1,2,5]`, `[5,6,"x"]`}},
		{"maxContains", `{"type": "array", "contains": {"const": "a"}, "maxContains": 2, "maxItems": 4}`,
			[]string{`["a"]`, `["a","b","a"]`, `[1,"a",{},[]]`}, []string{`[]`, `["b"]`, `["a","a","a"]`, `["a",1,2,3,4]`}},
		{"contains after prefixItems", `{"prefixItems": [{"type": "string"}], "contains": {"type": "string"}, "minContains": 2, "maxContains": 2}`,
			[]string{`["a","b"]`, `["a",1,"b"]`}, []string{`["a"]`, `["a","b","c"]`, `[1,"a","b"]`}},
		{"minProperties and maxProperties", `{"properties": {"a": {}, "b": {}}, "minProperties": 2, "maxProperties": 3}`,
			[]string{`{"a":1,"b":2}`, `{"a":1,"c":2}`, `{"c":1,"d":2,"e":3}`, `{"a":1,"b":2,"c":3}`}, []string{`{}`, `{"a":1}`, `{"c":1}`, `{"a":1,"b":2,"c":3,"d":4}`}},
		{"required properties not listed, in any order", `{"properties": {"a": {"type": "integer"}}, "required": ["y", "x"], "additionalProperties": {"type": "string"}}`,
			[]string{`{"x":"1","y":"2"}`, `{"y":"1","x":"2"}`, `{"a":1,"x":"1","z":"3","y":"2"}`}, []string{`{"x":"1"}`, `{"x":"1","y":"2","x":"3"}`, `{"x":1,"y":"2"}`, `{"x":"1","y":"2","a":1}`}},
		{"dependentRequired", `{"properties": {"a": {}}, "dependentRequired": {"a": ["b"], "c": ["d", "e"]}}`,
			[]string{`{}`, `{"a":1,"b":2}`, `{"b":1}`, `{"e":1,"c":2,"d":3}`, `{"a":1,"d":1,"b":2}`}, []string{`{"a":1}`, `{"c":1,"d":2}`, `{"a":1,"c":1,"d":2,"e":3}`}},
		{"dependentSchemas", `{"type": "object", "dependentSchemas": {"card": {"properties": {"billing": {"type": "string"}}, "required": ["billing"]}}}`,
			[]string{`{}`, `{"billing":1}`, `{"billing":"x","card":1}`}, []string{`{"card":1}`, `{"card":1,"billing":2}`}},
		{"multipleOf on integers", `{"type": "integer", "multipleOf": 7, "minimum": -20, "maximum": 30}`,
			[]string{"0", "7", "-14", "28", "21"}, []string{"1", "-21", "35", "3.5", "14.0"}},
		{"multipleOf on numbers", `{"type": "number", "multipleOf": 0.25}`,
			[]string{"0", "0.25", "-1.5", "3", "100.75"}, []string{"0.3", "1.125", "0.2", "1.50"}},
		{"multipleOf in two allOf parts", `{"allOf": [{"multipleOf": 4}, {"multipleOf": 6}], "type": "integer"}`,
			[]string{"0", "12", "-24", "36"}, []string{"4", "6", "18"}},
		{"if and then in different allOf parts", `{"allOf": [{"if": {"minimum": 5}}, {"then": {"const": 7}}]}`,
			[]string{"5", "6", "7", `"x"`}, nil},
		{"additionalProperties of another part", `{"allOf": [{"properties": {"a": {"type": "integer"}}, "additionalProperties": false}, {"properties": {"a": {"minimum": 2}, "b": {}}}]}`,
			[]string{`{}`, `{"a":2}`}, []string{`{"a":1}`, `{"a":2,"b":1}`, `{"c":1}`}},
		{"items of another part", `{"allOf": [{"prefixItems": [{"type": "string"}]}, {"items": {"maxLength": 2}}]}`,
			[]string{`[]`, `["ab"]`, `["ab","c",1]`}, []string{`["abc"]`, `[1]`, `["a","abc"]`}},
		{"unevaluatedProperties inside a part", `{"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}, "unevaluatedProperties": false}]}`,
			[]string{`{}`, `{"b":1}`}, []string{`{"a":1}`, `{"c":1}`}},
		{"unevaluatedProperties beside anyOf", `{"anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"b": {}}, "required": ["b"]}], "unevaluatedProperties": false}`,
			[]string{`{"a":1}`, `{"b":1}`, `{"a":1,"b":2}`}, []string{`{}`, `{"a":1,"c":2}`, `{"a":"x","b":1,"c":2}`}},
		{"unevaluatedProperties beside if", `{"if": {"properties": {"k": {"const": "x"}}, "required": ["k"]}, "then": {"properties": {"t": {}}}, "else": {"properties": {"e": {}}}, "unevaluatedProperties": false}`,
			[]string{`{"k":"x"}`, `{"k":"x","t":1}`, `{"e":1}`, `{}`}, []string{`{"k":"y"}`, `{"k":"x","e":1}`, `{"t":1}`, `{"k":"y","e":1}`}},
		{"unevaluatedProperties beside not", `{"properties": {"a": {}}, "not": {"properties": {"b": {"type": "string"}}, "required": ["b"]}, "unevaluatedProperties": {"type": "integer"}}`,
			[]string{`{"a":"s"}`, `{"b":1}`, `{"a":"s","c":2}`}, []string{`{"b":"s"}`, `{"c":"s"}`, `{"b":"s","a":1}`}},
		{"bounds in two allOf parts", `{"allOf": [{"minimum": 2, "maxLength": 3}, {"minimum": 5, "maxLength": 1}]}`,
			[]string{"5", "7", `"a"`}, []string{"4", "2", `"ab"`}},
		{"$ref to an $id and an $anchor", `{"$id": "https://example.com/root.json", "properties": {"a": {"$ref": "item.json"}, "b": {"$ref": "#num"}, "c": {"$ref": "item.json#/$defs/small"}}, "$defs": {"item": {"$id": "item.json", "type": "string", "$defs": {"small": {"maxLength": 1}}}, "n": {"$anchor": "num", "type": "number"}}}`,
			[]string{`{"a":"x","b":1.5,"c":"y"}`}, []string{`{"a":1}`, `{"b":"x"}`, `{"c":"yz"}`}},
		{"unevaluatedItems beside contains", `{"prefixItems": [true], "contains": {"type": "string"}, "minContains": 0, "unevaluatedItems": {"type": "integer"}}`,
			[]string{`[]`, `[null]`, `[null,"a",1]`, `[null,2]`}, []string{`[null,true]`, `[null,"a",1.5]`}},
		{"uniqueItems over a few values", `{"type": "array", "items": {"enum": ["a", "b", 1]}, "maxItems": 2, "uniqueItems": true}`,
			[]string{`[]`, `["a"]`, `["a","b"]`, `[1,"a"]`}, []string{`["a","a"]`, `[1,1]`, `["a","b",1]`, `["c"]`}},
		{"uniqueItems over one item", `{"type": "array", "maxItems": 1, "uniqueItems": true}`,
			[]string{`[]`, `[{"a":[1,1]}]`}, []string{`[1,2]`}},
		{"$dynamicRef to the outermost $dynamicAnchor", `{"$id": "https://example.com/root", "$ref": "list", "$defs": {"str": {"$dynamicAnchor": "item", "type": "string"}, "list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#item"}, "$defs": {"any": {"$dynamicAnchor": "item"}}}}}`,
			[]string{`[]`, `["a","b"]`}, []string{`[1]`, `["a",null]`, `{}`}},
		{"not of anyOf, and two nots", `{"not": {"anyOf": [{"type": "string"}, {"minimum": 2}]}, "allOf": [{"not": {"const": -1}}, {"not": {"type": "integer"}}]}`,
			[]string{"1.5", "-1.25"}, []string{`"a"`, "2", "2.5", "1", "-1", "-3", "null", "[]", "{}", "true"}},
		{"not of an integer with bounds", `{"not": {"type": "integer", "minimum": 0}}`,
			[]string{"-1", "0.5", "3.25", `"a"`, "null"}, []string{"0", "51", "7"}},
		{"not multipleOf", `{"type": "number", "not": {"multipleOf": 0.5}, "maximum": 3}`,
			[]string{"0.25", "1.75", "-3.1", "2.9"}, []string{"1", "0.5", "-2", "3.5", "3", "1e-7"}},
		{"else of items", `{"if": {"items": {"type": "string"}}, "else": {"maxItems": 2}}`,
			[]string{`[]`, `["a","b","c"]`, `[1,"a"]`, `1`}, []string{`[1,2,3]`, `["a",1,"b"]`}},
		{"not of prefixItems and contains", `{"type": "array", "not": {"prefixItems": [{"type": "integer"}], "contains": {"const": "x"}, "maxContains": 1}}`,
			[]string{`["a"]`, `[1]`, `[1,"x","x"]`, `["x"]`}, []string{`[1,"x"]`, `[2,"y","x"]`}},
		{"two contains", `{"allOf": [{"contains": {"const": "a"}}, {"contains": {"type": "integer"}, "maxContains": 1}], "maxItems": 4}`,
			[]string{`["a",1]`, `[2,"a","a"]`, `[null,"a",3,true]`}, []string{`["a"]`, `[1]`, `["a",1,2]`, `[1,"b"]`}},
		{"contains in nested if beside unevaluatedItems", `{"if": {"contains": {"const": "a"}}, "then": {"if": {"contains": {"const": "b"}}}, "unevaluatedItems": false}`,
			[]string{`[]`, `["a"]`, `["b","a","b"]`, `["a","a"]`}, []string{`["b"]`, `["a","c"]`, `[1]`}},
		{"a negated prefixItems beside unevaluatedItems", `{"prefixItems": [{"const": "a"}], "if": {"prefixItems": [true, {"const": "b"}]}, "then": {"prefixItems": [true, true, {"const": "c"}]}, "unevaluatedItems": false}`,
			[]string{`[]`, `["a"]`, `["a","b"]`, `["a","b","c"]`}, []string{`["a","x"]`, `["a","b","d"]`, `["a","b","c","d"]`}},
		{"not of dependentRequired and maxProperties", `{"type": "object", "not": {"dependentRequired": {"a": ["b"]}, "maxProperties": 2}}`,
			[]string{`{"a":1}`, `{"a":1,"c":2}`, `{"b":1,"c":2,"d":3}`}, []string{`{}`, `{"a":1,"b":2}`, `{"c":1}`}},
		{"oneOf, exactly one", `{"oneOf": [{"type": "integer", "minimum": 3}, {"type": "number", "maximum": 5}]}`,
			[]string{"6", "2", "4.5", "-1"}, []string{"3", "5", "4", `"x"`}},
		{"oneOf of tagged objects", `{"oneOf": [{"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]}, {"properties": {"kind": {"const": "b"}}, "required": ["kind"]}]}`,
			[]string{`{"kind":"a","x":1}`, `{"kind":"b","x":"s"}`}, []string{`{"kind":"c"}`, `{"kind":"a","x":"s"}`, `{}`}},
		{"allOf of different keywords", `{"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}, {"required": ["a"]}]}`,
			[]string{`{"a":1}`}, []string{`{}`, `{"a":"x"}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := jsonschema.Compile([]byte(c.schema), jsonschema.Options{FlexibleWhitespace: true})
			if err != nil {
				t.Fatal(err)
			}
			compact, err := jsonschema.Compile([]byte(c.schema), jsonschema.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range c.accept {
				if got := accepts(earley.New(compact), []byte(doc)); got == strings.ContainsAny(doc, " \n") && !strings.HasPrefix(doc, `"`) {
					t.Errorf("compact whitespace: %s accepted %v", doc, got)
				}
			}
			for _, doc := range c.accept {
				if !accepts(earley.New(cfg), []byte(doc)) {
					t.Errorf("rejected %s", doc)
				}
			}
			for _, doc := range c.reject {
				if accepts(earley.New(cfg), []byte(doc)) {
					t.Errorf("accepted %s", doc)
				}
			}
		})
	}
}

func TestCompileErrorsNameTheKeywordAndPointer(t *testing.T) {
	for _, c := range []struct{ name, schema, want string }{
		{"not JSON", `{"type": `, "not valid JSON"},
		{"unsupported keyword", `{"properties": {"a": {"$recursiveRef": "#"}}}`, `json schema at /properties/a: keyword "$recursiveRef" is not supported`},
		{"unevaluated beside a large anyOf", `{"anyOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["c"]}, {"required": ["d"]}, {"required": ["e"]}], "unevaluatedProperties": false}`, "json schema at /anyOf: anyOf of more than 4 branches beside unevaluatedProperties or unevaluatedItems is not supported"},
		{"not of patternProperties", `{"not": {"patternProperties": {"^a": {"type": "string"}}}}`, `json schema at /not: the complement of a schema with "patternProperties" is not supported`},
		{"not of a $dynamicRef", `{"$defs": {"a": {"$dynamicAnchor": "a", "type": "string"}}, "not": {"$dynamicRef": "#a"}}`, `json schema at /not: the complement of a schema with "$dynamicRef" is not supported`},
		{"else of items after prefixItems", `{"if": {"prefixItems": [true], "items": {"type": "string"}}, "else": {"maxItems": 2}}`, `json schema at /if: the complement of items beside prefixItems is not supported`},
		{"remote ref", `{"$ref": "https://example.com/s.json"}`, "refers to another document"},
		{"missing anchor", `{"$defs": {"a": {"$anchor": "x"}}, "$ref": "#y"}`, `json schema at /$ref: "#y": no $anchor "y" in the schema`},
		{"missing ref", `{"$ref": "#/$defs/nope"}`, `no "$defs" in the schema`},
		{"unknown format", `{"type": "string", "format": "hostname"}`, `format "hostname" is not supported`},
		{"multipleOf with too many remainders", `{"type": "integer", "multipleOf": 0.123456789}`, `json schema at /multipleOf: multipleOf 123456789/1000000000 needs more than 4000 states`},
		{"other meta-schema", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "integer"}`, "meta-schema"},
		{"accepts nothing", `false`, "the schema accepts nothing"},
		{"empty range", `{"type": "integer", "minimum": 3, "maximum": 2}`, "the schema accepts nothing"},
		{"too large", `{"description": "` + strings.Repeat("x", jsonschema.MaxSchemaBytes) + `"}`, "at most"},
		{"unknown type", `{"type": "decimal"}`, `unknown type "decimal"`},
		{"too many rules", nestedIfs(12), "the grammar has more than 50000 rules"},
		{"uniqueItems", `{"type": "array", "uniqueItems": true}`, "uniqueItems true is not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := jsonschema.Compile([]byte(c.schema), jsonschema.Options{})
			var se *jsonschema.Error
			if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want a *jsonschema.Error containing %q", err, c.want)
			}
		})
	}
}

func TestMarshalAndOrder(t *testing.T) {
	schema, _ := jsonschema.Decode([]byte(`{"properties": {"b": {}, "a": {"properties": {"y": {}, "x": {}}}}}`))
	doc, _ := jsonschema.Decode([]byte(`{"a": {"x": 1.0, "y": "\u2028<&>"}, "c": [1e2, 0.5], "b": null}`))
	got, err := jsonschema.Marshal(jsonschema.Order(schema, doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":null,"a":{"y":"\u2028<&>","x":1},"c":[100,0.5]}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestOrderListsDependentSchemasProperties(t *testing.T) {
	schema, _ := jsonschema.Decode([]byte(`{"properties": {"a": {}}, "dependentSchemas": {"card": {"properties": {"billing": {}, "zip": {}}}}}`))
	doc, _ := jsonschema.Decode([]byte(`{"zip": 1, "card": 2, "x": 3, "billing": 4, "a": 5}`))
	got, err := jsonschema.Marshal(jsonschema.Order(schema, doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":5,"billing":4,"zip":1,"card":2,"x":3}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	cfg, err := jsonschema.Compile(schema2bytes(t, schema), jsonschema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !accepts(earley.New(cfg), got) {
		t.Errorf("the grammar rejects %s", got)
	}
}

func schema2bytes(t *testing.T, v any) []byte {
	b, err := jsonschema.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOrderWritesIfThenElsePropertiesInOneOrder(t *testing.T) {
	schema := `{"properties": {"z": {}}, "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]}, "then": {"properties": {"x": {"type": "integer"}}}, "else": {"properties": {"y": {"type": "string"}}}}`
	s, _ := jsonschema.Decode([]byte(schema))
	cfg, err := jsonschema.Compile([]byte(schema), jsonschema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		doc, want string
		valid     bool
	}{
		{`{"x": 1, "other": 2, "kind": "a", "z": 3}`, `{"z":3,"kind":"a","x":1,"other":2}`, true},
		{`{"y": "s", "kind": "b", "x": "no matter"}`, `{"kind":"b","x":"no matter","y":"s"}`, true},
		{`{"y": 1, "kind": "b"}`, `{"kind":"b","y":1}`, false},
		{`{"x": "s", "kind": "a"}`, `{"kind":"a","x":"s"}`, false},
	} {
		d, _ := jsonschema.Decode([]byte(c.doc))
		got, err := jsonschema.Marshal(jsonschema.Order(s, d))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("Order(%s) = %s, want %s", c.doc, got, c.want)
		}
		if accepts(earley.New(cfg), got) != c.valid {
			t.Errorf("%s: accepted %v, want %v", got, !c.valid, c.valid)
		}
	}
}

// nestedIfs is a schema of n if/then/else nested in both then and else, each on its own
// property: 2ⁿ branches.
func nestedIfs(n int) string {
	s := `{"type": "object"}`
	for i := range n {
		s = fmt.Sprintf(`{"if": {"properties": {"p%d": {"enum": [1, 2, "a"]}}, "required": ["p%d"]}, "then": %s, "else": %s}`, i, i, s, s)
	}
	return s
}

// TestOneSpace: with OneSpace the grammar takes JSON as json.dumps writes it (", " and ": "),
// compact JSON, and one space wherever JSON allows whitespace; never two blanks, a tab or a
// newline.
func TestOneSpace(t *testing.T) {
	schema := `{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}}}, "required": ["a"], "additionalProperties": false}`
	cfg, err := jsonschema.Compile([]byte(schema), jsonschema.Options{OneSpace: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{`{"a":1}`, `{"a": 1, "b": ["x", "y"]}`, `{ "a" : 1 , "b" : [ "x" ] }`, `{"a": 1,"b":[]}`} {
		if !accepts(earley.New(cfg), []byte(doc)) {
			t.Errorf("rejected %s", doc)
		}
	}
	for _, doc := range []string{`{"a":  1}`, "{\"a\":\t1}", "{\"a\":\n1}", `{"a": 1, "b": ["x",  "y"]}`, `{"a": "1"}`} {
		if accepts(earley.New(cfg), []byte(doc)) {
			t.Errorf("accepted %q", doc)
		}
	}
}
