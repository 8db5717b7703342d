package constraint_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint"
	loomschema "github.com/loomlm/loom/constraint/jsonschema"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/strategies"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// orderSchema is a realistic API schema: nested objects, arrays, enums, bounded integers,
// a non-negative number, required and optional keys, a string format and $ref.
const orderSchema = `{
  "$defs": {
    "item": {
      "type": "object",
      "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
        "price": {"type": "number", "minimum": 0}
      },
      "required": ["sku", "quantity"],
      "additionalProperties": false
    }
  },
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 1000, "maximum": 9999},
    "status": {"enum": ["pending", "paid", "shipped"]},
    "customer": {
      "type": "object",
      "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 24},
        "email": {"type": "string", "format": "email"},
        "vip": {"type": "boolean"}
      },
      "required": ["name"],
      "additionalProperties": false
    },
    "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1, "maxItems": 3},
    "note": {"type": ["string", "null"], "maxLength": 30}
  },
  "required": ["id", "status", "customer", "items"],
  "additionalProperties": false
}`

// TestJSONSchemaSampling samples 100 seeds on the embedded model under a realistic schema:
// every output that ends is valid for an independent validator (santhosh-tekuri/jsonschema),
// and most end within the token budget.
func TestJSONSchemaSampling(t *testing.T) {
	model, tok := openDefault(t)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	comp.AssertFormat()
	if err := comp.AddResource("order.json", doc); err != nil {
		t.Fatal(err)
	}
	validator, err := comp.Compile("order.json")
	if err != nil {
		t.Fatal(err)
	}
	temp, _ := processors.NewTemperature(0.9)
	complete := 0
	for seed := uint64(1); seed <= 100; seed++ {
		p, err := constraint.NewJSONSchema([]byte(orderSchema), loomschema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pipe := &core.Pipeline{Model: model, Tokenizer: tok, Processors: []core.LogitsProcessor{p, temp}, Strategy: strategies.Ancestral{}}
		res, err := core.Generate(context.Background(), pipe, core.Request{Prompt: "The order, as JSON:", MaxNewTokens: 400, Seed: core.SeedOf(seed)})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		s := res.Sequences[0]
		if s.FinishReason != core.FinishEOS {
			if seed <= 4 {
				t.Logf("seed %d cut: %s", seed, s.Text)
			}
			continue // cut by the budget: checked as a prefix by the grammar already
		}
		complete++
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(s.Text))
		if err != nil {
			t.Fatalf("seed %d: %q is not JSON: %v", seed, s.Text, err)
		}
		if err := validator.Validate(v); err != nil {
			t.Fatalf("seed %d: %s is invalid: %v", seed, s.Text, err)
		}
		var round any
		if json.Unmarshal([]byte(s.Text), &round) != nil {
			t.Fatalf("seed %d: encoding/json rejects %q", seed, s.Text)
		}
		if seed <= 3 {
			t.Logf("seed %d: %s", seed, s.Text)
		}
	}
	t.Logf("%d of 100 outputs ended within 400 tokens, all valid", complete)
	if complete < 80 {
		t.Errorf("only %d of 100 outputs ended within 400 tokens", complete)
	}
}

// TestJSONSchemaSuiteThroughTheMask walks the valid documents of the JSON-Schema-Test-Suite
// that the grammar accepts, and those of the API schemas (maskCorpus), through the processor's
// token mask on the embedded tokenizer, in
// two tokenizations — the tokenizer's own and one token per byte — checking that every token
// is allowed at its step and that the end of sequence is allowed after the last.
func TestJSONSchemaSuiteThroughTheMask(t *testing.T) {
	_, tok := openDefault(t)
	byByte := map[byte]core.TokenID{}
	for id := 0; id < tok.VocabSize(); id++ {
		if b := tok.TokenBytes(core.TokenID(id)); len(b) == 1 {
			if _, ok := byByte[b[0]]; !ok {
				byByte[b[0]] = core.TokenID(id)
			}
		}
	}
	eos := tok.Special().EOS
	opt := loomschema.Options{FormatAnnotation: true}
	walked := 0
	for _, c := range maskCorpus(t) {
		for _, doc := range c.docs {
			canonical, err := tok.Encode(doc, core.EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var bytewise []core.TokenID
			for _, b := range []byte(doc) {
				id, ok := byByte[b]
				if !ok {
					t.Fatalf("no one-byte token for %q", b)
				}
				bytewise = append(bytewise, id)
			}
			for _, ids := range [][]core.TokenID{canonical, bytewise} {
				p, err := constraint.NewJSONSchema(c.schema, opt)
				if err != nil {
					t.Fatal(err)
				}
				seq, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
				if err != nil {
					t.Fatal(err)
				}
				for step, id := range append(ids, eos) {
					row := make([]float32, tok.VocabSize())
					cands := core.NewCandidates(row)
					if err := p.Process(seq, cands); err != nil {
						t.Fatalf("%s: %s step %d: %v", c.name, doc, step, err)
					}
					if math.IsInf(float64(row[id]), -1) {
						t.Fatalf("%s: %s: token %d (%q) at step %d is masked", c.name, doc, id, tok.TokenBytes(id), step)
					}
					p.Accept(seq, id)
				}
			}
			walked++
		}
	}
	t.Logf("%d valid documents walked through the mask, two tokenizations each", walked)
	if walked < 250 {
		t.Errorf("only %d documents walked", walked)
	}
}
