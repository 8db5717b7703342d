package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Object is a JSON object that keeps its keys in the order they were written: a schema's
// properties are generated in that order.
type Object struct {
	Keys   []string
	Values map[string]any
}

// Get returns the value of key and whether it is present.
func (o *Object) Get(key string) (any, bool) {
	v, ok := o.Values[key]
	return v, ok
}

// Decode reads one JSON value: objects as *Object, arrays as []any, numbers as json.Number,
// strings, booleans and nil. A duplicate key is an error (a schema with one is ambiguous).
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &Object{Values: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if _, dup := o.Values[k]; dup {
					return nil, fmt.Errorf("key %q appears twice in one object", k)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.Keys = append(o.Keys, k)
				o.Values[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// Marshal writes v (as Decode returns it) in the form a compiled schema generates: no
// whitespace, object keys in their order, strings escaped as encoding/json does without HTML
// escaping, numbers in their canonical form (CanonicalNumber).
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := marshalTo(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func marshalTo(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		s, err := CanonicalNumber(v)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case string:
		b.WriteString(quote(v))
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := marshalTo(b, x); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case *Object:
		b.WriteByte('{')
		for i, k := range v.Keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quote(k))
			b.WriteByte(':')
			if err := marshalTo(b, v.Values[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("cannot marshal %T", v)
	}
	return nil
}

// quote is s as a JSON string, escaped as encoding/json escapes it (without HTML escaping).
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// CanonicalNumber is the form in which a compiled schema writes a number: an integral value
// as its digits (1.0 and 1e2 are 1 and 100, as JSON Schema counts them integers), any other as
// encoding/json writes a float64.
func CanonicalNumber(n json.Number) (string, error) {
	f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
	if err != nil {
		return "", fmt.Errorf("number %s: %v", n, err)
	}
	if f.IsInt() {
		if i, _ := f.Int(nil); i.BitLen() <= 128 {
			return i.String(), nil
		}
	}
	x, _ := f.Float64()
	out, err := json.Marshal(x)
	if err != nil {
		return "", fmt.Errorf("number %s: %v", n, err)
	}
	return string(out), nil
}

// isInteger reports whether n is an integral value.
func isInteger(n json.Number) bool {
	f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
	return err == nil && f.IsInt()
}

// jsonType is the JSON Schema type of a decoded value ("integer" for integral numbers).
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if isInteger(v) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case *Object:
		return "object"
	}
	return "?"
}

// Order returns doc (as Decode returns it) with the keys of its objects in the order the
// schema's grammar writes them: the properties the schema lists (its own, then its $ref's,
// its allOf parts', its if's, then's and else's), then those of the anyOf and oneOf branches
// that list a key of the object, in their order, then the others in theirs. Marshal(Order(schema,
// doc)) is the form in which a valid document is a sentence of the grammar.
func Order(schema, doc any) any {
	o := orderer{root: schema, res: newResources(schema)}
	return o.order(schema, doc, 0)
}

type orderer struct {
	root any
	res  *resources
}

// resolve follows $ref (within the document) and returns the schema object, or nil.
func (o *orderer) resolve(s any) *Object {
	for hops := 0; hops < 20; hops++ {
		obj, ok := s.(*Object)
		if !ok {
			return nil
		}
		r, ok := obj.Get("$ref")
		if !ok {
			return obj
		}
		str, _ := r.(string)
		node, _, err := o.res.resolve(obj, str)
		if err != nil {
			return obj
		}
		if len(obj.Keys) > 1 { // $ref beside other keywords: those list the properties too
			if _, has := obj.Get("properties"); has {
				return obj
			}
		}
		s = node
	}
	return nil
}

// branchLists are the anyOf and oneOf lists of s and of its allOf parts and $ref target.
func (o *orderer) branchLists(s *Object, depth int) [][]any {
	if depth > 20 {
		return nil
	}
	var out [][]any
	for _, kw := range []string{"anyOf", "oneOf"} {
		if list, ok := s.Values[kw].([]any); ok {
			out = append(out, list)
		}
	}
	var subs []any
	if parts, ok := s.Values["allOf"].([]any); ok {
		subs = append(subs, parts...)
	}
	if ref, ok := s.Values["$ref"].(string); ok {
		if t, _, err := o.res.resolve(s, ref); err == nil {
			subs = append(subs, t)
		}
	}
	for _, sub := range subs {
		if so, ok := sub.(*Object); ok {
			out = append(out, o.branchLists(so, depth+1)...)
		}
	}
	return out
}

func (o *orderer) order(schema, doc any, depth int) any {
	s := o.resolve(schema)
	if depth > 100 {
		return doc
	}
	switch d := doc.(type) {
	case *Object:
		out := &Object{Values: map[string]any{}}
		var props *Object
		var extra any
		if s != nil {
			if c := sameKeys(s, d); c != nil { // a const or enum object: its order
				props = &Object{Keys: c.Keys, Values: c.Values}
			} else {
				deps, _ := s.Values["dependentSchemas"].(*Object)
				// The names the schema lists (its own, its $ref's, its allOf parts', if's, then's
				// and else's: every branch of if writes them all in one order), then those of the
				// anyOf and oneOf branches that list a key of d, in their order.
				names := o.res.listedNames(s, 0)
				for _, list := range o.branchLists(s, 0) {
					for _, b := range list {
						bn := o.res.listedNames(b, 0)
						if !slices.ContainsFunc(bn, func(k string) bool { _, ok := d.Values[k]; return ok }) {
							continue
						}
						for _, k := range bn {
							if !slices.Contains(names, k) {
								names = append(names, k)
							}
						}
					}
				}
				props = &Object{Values: map[string]any{}}
				for _, k := range names {
					props.Keys = append(props.Keys, k)
					props.Values[k] = o.propertySchema(s, k, 0)
				}
				extra = s.Values["additionalProperties"]
				// The schemas of present dependentSchemas list their properties after these.
				if deps != nil {
					props = o.withDependencies(props, deps, d)
				}
			}
		}
		var patterns *Object
		if s != nil {
			patterns, _ = s.Values["patternProperties"].(*Object)
		}
		sub := func(k string) any {
			if props != nil {
				if v, ok := props.Values[k]; ok {
					return v
				}
			}
			if patterns != nil {
				for _, p := range patterns.Keys {
					if d, err := patternDFA(p, ""); err == nil && d.Match(k) {
						return patterns.Values[p]
					}
				}
			}
			return extra
		}
		if props != nil {
			for _, k := range props.Keys {
				if v, ok := d.Values[k]; ok {
					out.Keys = append(out.Keys, k)
					out.Values[k] = o.order(sub(k), v, depth+1)
				}
			}
		}
		for _, k := range d.Keys {
			if _, done := out.Values[k]; done {
				continue
			}
			out.Keys = append(out.Keys, k)
			out.Values[k] = o.order(sub(k), d.Values[k], depth+1)
		}
		return out
	case []any:
		out := make([]any, len(d))
		var prefix []any
		var items any
		if s != nil {
			prefix, _ = s.Values["prefixItems"].([]any)
			items = s.Values["items"]
		}
		for i, v := range d {
			var sub any = items
			if i < len(prefix) {
				sub = prefix[i]
			}
			out[i] = o.order(sub, v, depth+1)
		}
		return out
	}
	return doc
}

// propertySchema is the first schema that s (or its $ref, allOf, if, then or else) lists for
// the property k, for the order of its value; true when none does.
func (o *orderer) propertySchema(node any, k string, depth int) any {
	s := o.resolve(node)
	if s == nil || depth > 20 {
		return true
	}
	if p, ok := s.Values["properties"].(*Object); ok {
		if v, ok := p.Get(k); ok {
			return v
		}
	}
	var subs []any
	if ref, ok := s.Values["$ref"].(string); ok {
		if t, _, err := o.res.resolve(s, ref); err == nil {
			subs = append(subs, t)
		}
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		if parts, ok := s.Values[kw].([]any); ok {
			subs = append(subs, parts...)
		}
	}
	for _, kw := range []string{"if", "then", "else"} {
		if v, ok := s.Get(kw); ok {
			subs = append(subs, v)
		}
	}
	for _, sub := range subs {
		if v := o.propertySchema(sub, k, depth+1); v != true {
			return v
		}
	}
	return true
}

// withDependencies is props followed by the properties the dependentSchemas of the keys
// present in d list, as the compiled schema orders them.
func (o *orderer) withDependencies(props, deps, d *Object) *Object {
	out := &Object{Values: map[string]any{}}
	add := func(p *Object) {
		for _, k := range p.Keys {
			if _, dup := out.Values[k]; !dup {
				out.Keys = append(out.Keys, k)
				out.Values[k] = p.Values[k]
			}
		}
	}
	if props != nil {
		add(props)
	}
	for _, k := range deps.Keys {
		if _, ok := d.Values[k]; !ok {
			continue
		}
		if dep := o.resolve(deps.Values[k]); dep != nil {
			if p, ok := dep.Values["properties"].(*Object); ok {
				add(p)
			}
		}
	}
	return out
}

// sameKeys returns the const or enum object of s that has exactly d's keys, if any.
func sameKeys(s *Object, d *Object) *Object {
	var cands []any
	if c, ok := s.Get("const"); ok {
		cands = append(cands, c)
	}
	if e, ok := s.Values["enum"].([]any); ok {
		cands = append(cands, e...)
	}
	for _, c := range cands {
		co, ok := c.(*Object)
		if !ok || len(co.Keys) != len(d.Keys) {
			continue
		}
		all := true
		for _, k := range d.Keys {
			if _, ok := co.Values[k]; !ok {
				all = false
				break
			}
		}
		if all {
			return co
		}
	}
	return nil
}
