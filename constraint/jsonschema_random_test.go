package constraint_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/earley"
	loomschema "github.com/loomlm/loom/constraint/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// randomDocument walks the grammar with random bytes (printable ASCII mostly, stopping at
// random where the document may end) and returns a complete sentence, or nil.
func randomDocument(m *earley.Matcher, rng *rand.Rand, limit int) []byte {
	var out []byte
	for len(out) < limit {
		if m.IsAccepting() && rng.IntN(3) == 0 {
			return out
		}
		next := m.NextBytes()
		var ascii, all []byte
		for b := 0; b < 256; b++ {
			if next.Has(byte(b)) {
				all = append(all, byte(b))
				if b >= 0x20 && b < 0x7f {
					ascii = append(ascii, byte(b))
				}
			}
		}
		if len(all) == 0 {
			break
		}
		pick := all
		if len(ascii) > 0 && rng.IntN(10) > 0 {
			pick = ascii
		}
		// Now and then a byte that ends a string, a member or a value, so that strings stay
		// short and walks reach the structure.
		var closing []byte
		for _, b := range []byte(`",:}]`) {
			if next.Has(b) {
				closing = append(closing, b)
			}
		}
		if len(closing) > 0 && rng.IntN(4) == 0 {
			pick = closing
		}
		b := pick[rng.IntN(len(pick))]
		if !m.Advance(b) {
			return nil
		}
		out = append(out, b)
	}
	if m.IsAccepting() {
		return out
	}
	return nil
}

// TestJSONSchemaSuiteRandomDocuments draws random sentences from the grammar of every suite
// schema that compiles, and of the API schemas, and checks each with an independent validator
// (santhosh-tekuri/jsonschema): a sentence it rejects would be a false positive (where a
// oneOf cannot be made exact it stays anyOf, as documented, and a sentence matching two of its
// branches would be reported: none of the corpus's does). Each
// sentence, its object keys shuffled, must come back through Order in a form the grammar
// accepts (the form in which the suite's valid documents are checked). LOOM_RANDOM_SEED=n
// draws ten times as many, from seed n; the race detector, a fifth.
func TestJSONSchemaSuiteRandomDocuments(t *testing.T) {
	seed, walks := uint64(7), 40
	if raceEnabled {
		walks = 8
	}
	if s := os.Getenv("LOOM_RANDOM_SEED"); s != "" {
		fmt.Sscan(s, &seed)
		walks = 400
	}
	files, _ := filepath.Glob("jsonschema/testdata/suite/*.json")
	if len(files) == 0 {
		t.Fatal("no suite files")
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	schemas, docs := 0, 0
	type group struct {
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
	}
	sources := map[string][]group{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var groups []group
		if err := json.Unmarshal(src, &groups); err != nil {
			t.Fatal(err)
		}
		sources[f] = groups
	}
	src, err := os.ReadFile("testdata/api-schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var api []struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(src, &api); err != nil {
		t.Fatal(err)
	}
	for _, a := range api {
		sources["api.json"] = append(sources["api.json"], group{a.Name, a.Schema})
	}
	for i, m := range mixedSchemas {
		sources["mixed.json"] = append(sources["mixed.json"], group{fmt.Sprint("mixed ", i), json.RawMessage(m)})
	}
	for _, f := range append(files, "api.json", "mixed.json") {
		for gi, g := range sources[f] {
			cfg, err := loomschema.Compile(g.Schema, loomschema.Options{FormatAnnotation: true})
			if err != nil {
				continue
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(g.Schema))
			if err != nil {
				t.Fatal(err)
			}
			comp := jsonschema.NewCompiler()
			url := fmt.Sprintf("https://loom.test/%s/%d.json", strings.TrimSuffix(filepath.Base(f), ".json"), gi)
			if err := comp.AddResource(url, doc); err != nil {
				t.Fatal(err)
			}
			validator, err := comp.Compile(url)
			if err != nil {
				continue // a schema the validator cannot load (a remote reference)
			}
			schemas++
			schema, err := loomschema.Decode(g.Schema)
			if err != nil {
				t.Fatal(err)
			}
			for range walks {
				d := randomDocument(earley.New(cfg), rng, 300)
				if d == nil {
					continue
				}
				if _, err := loomschema.Decode(d); err != nil && strings.Contains(err.Error(), "appears twice") {
					// A name written twice, which JSON allows without saying what it means (the
					// validator keeps the last value; minProperties counts both): not checked.
					continue
				}
				docs++
				v, err := jsonschema.UnmarshalJSON(bytes.NewReader(d))
				if err != nil {
					t.Errorf("%s: %s: %s is not JSON: %v", filepath.Base(f), g.Description, d, err)
					continue
				}
				if err := validator.Validate(v); err != nil {
					t.Errorf("%s: %s: the grammar accepts %s, which is invalid: %v", filepath.Base(f), g.Description, d, err)
				}
				// Its keys shuffled, Order writes it back in a form the grammar accepts (when
				// it was written in canonical form: Marshal rewrites numbers).
				ld, err := loomschema.Decode(d)
				if err != nil {
					t.Fatal(err)
				}
				if canon, _ := loomschema.Marshal(ld); !bytes.Equal(canon, d) {
					continue
				}
				again, err := loomschema.Marshal(loomschema.Order(schema, shuffled(ld, rng)))
				if err != nil {
					t.Fatal(err)
				}
				if !acceptsAll(earley.New(cfg), again) {
					t.Errorf("%s: %s: %s, its keys shuffled and ordered again, is %s, which the grammar rejects", filepath.Base(f), g.Description, d, again)
				}
			}
		}
	}
	t.Logf("%d random documents of %d schemas, all valid and ordered back", docs, schemas)
}

// mixedSchemas combine the keywords whose compilation rewrites schemas (if, not, contains,
// patternProperties, dependencies, unevaluated*, multipleOf, counts), with short names and
// values so that random walks reach their cases.
var mixedSchemas = []string{
	`{"type": "object", "properties": {"a": {"enum": [1, 2]}}, "patternProperties": {"^b": {"type": "integer", "multipleOf": 3}}, "propertyNames": {"maxLength": 2}, "additionalProperties": {"type": "boolean"}, "minProperties": 1, "maxProperties": 3}`,
	`{"if": {"properties": {"a": {"const": 1}}, "required": ["a"]}, "then": {"properties": {"b": {"type": "string", "maxLength": 1}}, "required": ["b"]}, "else": {"not": {"required": ["b"]}}, "unevaluatedProperties": false}`,
	`{"type": "array", "prefixItems": [{"type": "integer"}], "contains": {"type": "string", "maxLength": 1}, "minContains": 1, "maxContains": 2, "maxItems": 4, "unevaluatedItems": {"type": "boolean"}}`,
	`{"type": "object", "dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"properties": {"a": {"type": "integer"}}}}, "properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": false}`,
	`{"anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"b": {"type": "null"}}, "required": ["b"]}], "unevaluatedProperties": {"type": "string", "maxLength": 0}}`,
	`{"not": {"anyOf": [{"type": "string"}]}, "allOf": [{"not": {"type": "integer", "minimum": 0}}, {"not": {"enum": [null, true, -1.5]}}]}`,
	`{"type": "number", "multipleOf": 0.25, "exclusiveMinimum": -2, "maximum": 3}`,
	`{"type": "array", "items": {"enum": ["a", "b", null]}, "maxItems": 3, "uniqueItems": true}`,
	`{"type": "object", "required": ["x", "y"], "properties": {"z": {"type": "string"}}, "additionalProperties": {"type": "integer", "not": {"const": 0}}}`,
	`{"if": {"type": "integer"}, "then": {"multipleOf": 2}, "else": {"if": {"type": "string"}, "then": {"pattern": "^a", "maxLength": 2}, "else": {"type": ["null", "boolean"]}}}`,
	`{"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "string"}, "^.$": {"enum": [1, "x"]}}, "additionalProperties": false}`,
	`{"type": "object", "propertyNames": {"enum": ["a", "b", "c"]}, "dependentRequired": {"a": ["b"]}, "if": {"required": ["c"]}, "then": {"properties": {"c": {"const": 1}}}, "else": {"maxProperties": 1}}`,
	`{"type": "array", "items": {"enum": [1, "a", null, true]}, "contains": {"const": "a"}, "maxContains": 1, "minItems": 1}`,
	`{"properties": {"a": {"type": "integer"}}, "if": {"properties": {"a": {"maximum": 0}}}, "then": {"properties": {"b": {"type": "string"}}}, "else": {"properties": {"c": {"type": "boolean"}}}, "unevaluatedProperties": false}`,
	`{"$id": "https://example.com/root", "$ref": "list", "$defs": {"str": {"$dynamicAnchor": "item", "type": "string", "maxLength": 1}, "list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#item"}, "$defs": {"any": {"$dynamicAnchor": "item"}}}}}`,
	`{"type": "object", "properties": {"a": {"not": {"type": "string", "pattern": "^b"}}}, "required": ["a"], "not": {"required": ["z"]}}`,
	`{"type": "integer", "multipleOf": 3, "not": {"multipleOf": 2}, "minimum": -30, "maximum": 30}`,
	`{"if": {"items": {"enum": [1, "a"]}}, "then": {"maxItems": 2}, "else": {"maxItems": 4, "minItems": 2}}`,
	`{"type": "array", "not": {"contains": {"type": "string"}, "maxContains": 1}, "maxItems": 4}`,
	`{"type": "array", "allOf": [{"contains": {"const": "a"}, "maxContains": 2}, {"contains": {"type": "integer"}}], "maxItems": 5}`,
	`{"if": {"contains": {"const": "a"}}, "then": {"if": {"contains": {"const": 1}}}, "unevaluatedItems": {"type": "boolean"}}`,
	`{"type": "object", "not": {"dependentRequired": {"a": ["b"]}, "minProperties": 2}, "propertyNames": {"enum": ["a", "b", "c"]}}`,
	`{"if": {"dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}}}, "maxProperties": 2}, "then": {"required": ["c"]}, "else": {"properties": {"c": false}}}`,
	`{"prefixItems": [{"enum": ["a", 1]}], "if": {"prefixItems": [true, {"const": "b"}]}, "then": {"prefixItems": [true, true, {"type": "integer"}]}, "else": {"maxItems": 2}, "unevaluatedItems": {"type": "null"}}`,
	`{"type": "array", "not": {"prefixItems": [{"type": "integer"}, {"const": "b"}]}, "maxItems": 3}`,
}

// shuffled is v with the keys of its objects in a random order.
func shuffled(v any, rng *rand.Rand) any {
	switch d := v.(type) {
	case *loomschema.Object:
		out := &loomschema.Object{Keys: slices.Clone(d.Keys), Values: map[string]any{}}
		rng.Shuffle(len(out.Keys), func(i, j int) { out.Keys[i], out.Keys[j] = out.Keys[j], out.Keys[i] })
		for k, x := range d.Values {
			out.Values[k] = shuffled(x, rng)
		}
		return out
	case []any:
		out := make([]any, len(d))
		for i, x := range d {
			out[i] = shuffled(x, rng)
		}
		return out
	}
	return v
}

// acceptsAll reports whether the matcher consumes doc completely and accepts it.
func acceptsAll(m *earley.Matcher, doc []byte) bool {
	for _, b := range doc {
		if !m.Advance(b) {
			return false
		}
	}
	return m.IsAccepting()
}
