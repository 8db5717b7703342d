package jsonschema

import (
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// notStrings is a keyword that Decode never writes (its name is not valid UTF-8, and Decode's
// keys are): its value lists schemas of strings, and a string must match none of them. It is
// how a complement says "the strings but these", which no keyword of JSON Schema says.
const notStrings = "\xffnot-strings"

// hiddenProperties is a keyword Decode never writes (see notStrings): properties that hold
// as properties does but evaluate nothing (unevaluatedProperties still applies to them), as a
// complement's must, since not and a failed if keep no annotations.
const hiddenProperties = "\xffproperties"

// hiddenPrefixItems and hiddenItems are keywords Decode never writes (see notStrings): as
// prefixItems and items, but evaluating nothing (a complement's, beside unevaluatedItems).
const (
	hiddenPrefixItems = "\xffprefixItems"
	hiddenItems       = "\xffitems"
)

// propertyOrder is a keyword Decode never writes (see notStrings): the order in which an
// object writes the properties it names, listed or hidden (if/then/else's branches share it).
const propertyOrder = "\xffproperty-order"

// notIntegers is a keyword Decode never writes (see notStrings): true on a number schema
// means the numbers with a fraction, written as plain decimals or, below 10⁻⁶, with a
// negative exponent (as CanonicalNumber writes them).
const notIntegers = "\xffnot-integers"

// notMultipleOf is a keyword Decode never writes (see notStrings): the numbers that are not
// multiples of its value (written as plain decimals).
const notMultipleOf = "\xffnot-multipleOf"

// MaxComplement bounds the number of schemas a complement (not, the else branch of if) is the
// union of.
const MaxComplement = 64

// complement returns schemas whose union holds exactly the JSON values node does not accept,
// for the schemas where that union can be written with the keywords the compiler supports:
// booleans; the other types; bounds (the opposite bound); lengths, patterns, formats and the
// string values of const and enum (the strings outside their language); the numbers between
// the numeric values of const and enum, the booleans and null they leave out; required
// (objects without the property); properties (objects whose property has a value in the
// complement of its schema); minItems and maxItems; items without prefixItems (arrays that
// contain an item of its complement), prefixItems (an item in its position's complement),
// contains (too few or too many matching items); minProperties and maxProperties;
// dependentRequired (the property present, one it requires absent) and dependentSchemas (the
// property present, and the object in its schema's complement); not (its schema); allOf and $ref (the
// union of their parts' complements), anyOf and oneOf (the merges of one branch of each
// branch's complement; for oneOf, also two branches at once). Anything else is refused with an error naming the
// keyword, as is a union larger than MaxComplement.
func (c *compiler) complement(node any, ptr string) ([]any, error) {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > 200 {
		return nil, errAt(ptr, "schemas nest deeper than 200")
	}
	var out []any
	switch s := node.(type) {
	case bool:
		if s {
			return nil, nil
		}
		return []any{true}, nil
	case *Object:
		rest := &Object{Values: map[string]any{}}
		for _, k := range s.Keys {
			v := s.Values[k]
			var part []any
			var err error
			switch k {
			case "$ref":
				target, tptr, err := c.resolve(s, ptr, "$ref")
				if err != nil {
					return nil, err
				}
				part, err = c.complement(target, tptr)
				if err != nil {
					return nil, err
				}
			case "allOf":
				list, ok := v.([]any)
				if !ok || len(list) == 0 {
					return nil, errAt(ptr+"/allOf", "must be a non-empty array of schemas")
				}
				for i, p := range list {
					ps, err := c.complement(p, ptr+"/allOf/"+strconv.Itoa(i))
					if err != nil {
						return nil, err
					}
					part = append(part, ps...)
				}
			case "not":
				part = []any{v}
			case "anyOf", "oneOf":
				// ¬(A ∨ B ∨ …) = ¬A ∧ ¬B ∧ …: the merges of one branch of each complement; for
				// oneOf, also the documents two branches accept (A ∧ B).
				list, ok := v.([]any)
				if !ok || len(list) == 0 {
					return nil, errAt(ptr+"/"+k, "must be a non-empty array of schemas")
				}
				acc := []any{true}
				for i, b := range list {
					bad, err := c.complement(b, ptr+"/"+k+"/"+strconv.Itoa(i))
					if err != nil {
						return nil, err
					}
					var next []any
					for _, x := range acc {
						for _, y := range bad {
							m, err := c.merge([]any{x, y}, ptr+"/"+k)
							if err != nil {
								return nil, err
							}
							if m != false {
								next = append(next, m)
							}
							if len(next) > MaxComplement {
								return nil, errAt(ptr, "the complement of this schema is a union of more than %d schemas", MaxComplement)
							}
						}
					}
					acc = next
				}
				part = acc
				if k == "oneOf" {
					for i := range list {
						for j := i + 1; j < len(list); j++ {
							m, err := c.merge([]any{list[i], list[j]}, ptr+"/oneOf")
							if err != nil {
								return nil, err
							}
							if m != false {
								part = append(part, m)
							}
						}
					}
				}
			default:
				rest.Keys = append(rest.Keys, k)
				rest.Values[k] = v
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, part...)
		}
		ps, err := c.complementKeywords(rest, ptr)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	default:
		return nil, errAt(ptr, "a schema must be an object or a boolean")
	}
	if len(out) > MaxComplement {
		return nil, errAt(ptr, "the complement of this schema is a union of more than %d schemas", MaxComplement)
	}
	return out, nil
}

// schemaOf builds a schema object from keys and values.
func schemaOf(kv ...any) *Object {
	o := &Object{Values: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		o.Keys = append(o.Keys, k)
		o.Values[k] = kv[i+1]
	}
	return o
}

// complementKeywords is the complement of a schema without applicators: the values of
// another type, and for each keyword the values of its type that fail it.
func (c *compiler) complementKeywords(s *Object, ptr string) ([]any, error) {
	types, err := typesOf(s, ptr)
	if err != nil {
		return nil, err
	}
	has := func(t string) bool { return slices.Contains(types, t) }
	numeric := ""
	switch {
	case has("number"):
		numeric = "number"
	case has("integer"):
		numeric = "integer"
	}
	var out []any
	if len(types) < len(allTypes) {
		if has("integer") {
			out = append(out, schemaOf("type", "number", notIntegers, true))
		}
		var others []any
		for _, t := range allTypes {
			// Beside integer, the other numbers are those with a fraction (above).
			if !has(t) && !(t == "number" && has("integer")) {
				others = append(others, t)
			}
		}
		out = append(out, schemaOf("type", others))
	}
	strKeys := &Object{Values: map[string]any{}}
	values, hasValues := []any(nil), false
	for _, k := range s.Keys {
		v := s.Values[k]
		if annotations[k] {
			continue
		}
		switch k {
		case propertyOrder:
		case "type", "uniqueItems":
			if k == "uniqueItems" && v != false {
				return nil, errAt(ptr, "the complement of uniqueItems true is not supported")
			}
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			if numeric == "" {
				continue
			}
			if _, ok := v.(json.Number); !ok {
				return nil, errAt(ptr+"/"+k, "must be a number")
			}
			opposite := map[string]string{"minimum": "exclusiveMaximum", "maximum": "exclusiveMinimum",
				"exclusiveMinimum": "maximum", "exclusiveMaximum": "minimum"}[k]
			out = append(out, schemaOf("type", numeric, opposite, v))
		case "multipleOf":
			if numeric != "" {
				out = append(out, schemaOf("type", numeric, notMultipleOf, v))
			}
		case "minLength", "maxLength", "pattern", "format", notStrings:
			if k == "format" && c.opt.FormatAnnotation {
				continue
			}
			strKeys.Keys = append(strKeys.Keys, k)
			strKeys.Values[k] = v
		case "const":
			values, hasValues = []any{v}, true
		case "enum":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return nil, errAt(ptr+"/enum", "must be a non-empty array")
			}
			values, hasValues = list, true
		case "required":
			if !has("object") {
				continue
			}
			list, _ := v.([]any)
			for _, x := range list {
				name, ok := x.(string)
				if !ok {
					return nil, errAt(ptr+"/required", "must be an array of property names")
				}
				out = append(out, schemaOf("type", "object", hiddenProperties, schemaOf(name, false)))
			}
		case "properties", hiddenProperties:
			if !has("object") {
				continue
			}
			props, ok := v.(*Object)
			if !ok {
				return nil, errAt(ptr+"/properties", "must be an object of schemas")
			}
			for _, name := range props.Keys {
				bad, err := c.complement(props.Values[name], ptr+"/properties/"+escapePointer(name))
				if err != nil {
					return nil, err
				}
				for _, b := range bad {
					out = append(out, schemaOf("type", "object", "required", []any{name}, hiddenProperties, schemaOf(name, b)))
				}
			}
		case "additionalProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "patternProperties":
			// true (for every pattern) constrains nothing; anything else is refused.
			trivial := v == true
			if pats, ok := v.(*Object); ok && k == "patternProperties" {
				trivial = true
				for _, p := range pats.Keys {
					if _, err := patternDFA(p, ptr); err != nil || pats.Values[p] != true {
						trivial = false
					}
				}
			}
			if !trivial {
				return nil, errAt(ptr, "the complement of a schema with %q is not supported (not, or the else branch of if)", k)
			}
		case "minProperties", "maxProperties":
			if !has("object") {
				continue
			}
			i, err := count(s, k, ptr)
			if err != nil {
				return nil, err
			}
			if k == "minProperties" && i > 0 {
				out = append(out, schemaOf("type", "object", "maxProperties", json.Number(strconv.Itoa(i-1))))
			} else if k == "maxProperties" {
				out = append(out, schemaOf("type", "object", "minProperties", json.Number(strconv.Itoa(i+1))))
			}
		case "dependentRequired":
			// Objects with the property and without one it requires.
			if !has("object") {
				continue
			}
			deps, ok := v.(*Object)
			if !ok {
				return nil, errAt(ptr+"/dependentRequired", "must be an object of arrays of property names")
			}
			for _, name := range deps.Keys {
				list, _ := deps.Values[name].([]any)
				for _, x := range list {
					d, ok := x.(string)
					if !ok {
						return nil, errAt(ptr+"/dependentRequired", "must be an object of arrays of property names")
					}
					out = append(out, schemaOf("type", "object", "required", []any{name}, hiddenProperties, schemaOf(d, false)))
				}
			}
		case "dependentSchemas":
			// Objects with the property that its schema does not accept.
			if !has("object") {
				continue
			}
			deps, ok := v.(*Object)
			if !ok {
				return nil, errAt(ptr+"/dependentSchemas", "must be an object of schemas")
			}
			for _, name := range deps.Keys {
				bad, err := c.complement(deps.Values[name], ptr+"/dependentSchemas/"+escapePointer(name))
				if err != nil {
					return nil, err
				}
				for _, b := range bad {
					m, err := c.merge([]any{schemaOf("type", "object", "required", []any{name}), b}, ptr+"/dependentSchemas")
					if err != nil {
						return nil, err
					}
					if m != false {
						out = append(out, m)
					}
				}
			}
		case "minItems", "maxItems":
			if !has("array") {
				continue
			}
			i, err := count(s, k, ptr)
			if err != nil {
				return nil, err
			}
			if k == "minItems" && i > 0 {
				out = append(out, schemaOf("type", "array", "maxItems", json.Number(strconv.Itoa(i-1))))
			} else if k == "maxItems" {
				out = append(out, schemaOf("type", "array", "minItems", json.Number(strconv.Itoa(i+1))))
			}
		case "items":
			// Arrays with an item in the complement (beside prefixItems, an item after them:
			// not expressible with contains, refused).
			if !has("array") {
				continue
			}
			if _, ok := s.Get("prefixItems"); ok {
				return nil, errAt(ptr, "the complement of items beside prefixItems is not supported (not, or the else branch of if)")
			}
			bad, err := c.complement(v, ptr+"/items")
			if err != nil {
				return nil, err
			}
			if len(bad) > 0 {
				out = append(out, schemaOf("type", "array", "contains", anyOfSchemas(bad)))
			}
		case "prefixItems":
			// Arrays with the item at some position in that position's complement.
			if !has("array") {
				continue
			}
			list, ok := v.([]any)
			if !ok {
				return nil, errAt(ptr+"/prefixItems", "must be an array of schemas")
			}
			for i, p := range list {
				bad, err := c.complement(p, ptr+"/prefixItems/"+strconv.Itoa(i))
				if err != nil {
					return nil, err
				}
				for _, b := range bad {
					prefix := make([]any, i+1)
					for j := range i {
						prefix[j] = true
					}
					prefix[i] = b
					out = append(out, schemaOf("type", "array", "minItems", json.Number(strconv.Itoa(i+1)), "prefixItems", prefix))
				}
			}
		case "contains":
			// Arrays with fewer matching items than minContains, or more than maxContains.
			if !has("array") {
				continue
			}
			minC, err := count(s, "minContains", ptr)
			if err != nil {
				return nil, err
			}
			maxC, err := count(s, "maxContains", ptr)
			if err != nil {
				return nil, err
			}
			if minC < 0 {
				minC = 1
			}
			if minC > 0 {
				out = append(out, schemaOf("type", "array", "contains", v, "minContains", json.Number("0"), "maxContains", json.Number(strconv.Itoa(minC-1))))
			}
			if maxC >= 0 {
				out = append(out, schemaOf("type", "array", "contains", v, "minContains", json.Number(strconv.Itoa(maxC+1))))
			}
		case "minContains", "maxContains":
			// With contains, above; alone they change nothing.
		default:
			if supported[k] || unsupported[k] || strings.HasPrefix(k, "\xff") {
				return nil, errAt(ptr, "the complement of a schema with %q is not supported (not, or the else branch of if)", k)
			}
		}
	}
	if has("string") && (len(strKeys.Keys) > 0 || hasValues) {
		if hasValues {
			strKeys.Keys = append(strKeys.Keys, "enum")
			strKeys.Values["enum"] = values
		}
		out = append(out, schemaOf("type", "string", notStrings, []any{strKeys}))
	}
	if hasValues {
		for _, t := range []string{"null", "boolean", "object", "array"} {
			if !has(t) {
				continue
			}
			var listed []any
			for _, v := range values {
				if jsonType(v) == t {
					listed = append(listed, v)
				}
			}
			switch {
			case len(listed) == 0:
				out = append(out, schemaOf("type", t))
			case t == "boolean":
				for _, b := range []bool{false, true} {
					if !slices.Contains(listed, any(b)) {
						out = append(out, schemaOf("const", b))
					}
				}
			case t == "object" || t == "array":
				return nil, errAt(ptr, "the complement of an %s value in const or enum is not supported", t)
			}
		}
		if numeric != "" {
			out = append(out, numbersBetween(values, numeric)...)
		}
	}
	return out, nil
}

// numbersBetween are the numbers of type t (number or integer) other than the numeric values
// listed: the open intervals between them.
func numbersBetween(values []any, t string) []any {
	var nums []*big.Rat
	var text []json.Number
	for _, v := range values {
		n, ok := v.(json.Number)
		if !ok {
			continue
		}
		r, ok := new(big.Rat).SetString(string(n))
		if !ok {
			continue
		}
		i, found := slices.BinarySearchFunc(nums, r, func(a, b *big.Rat) int { return a.Cmp(b) })
		if found {
			continue
		}
		nums = slices.Insert(nums, i, r)
		text = slices.Insert(text, i, n)
	}
	if len(nums) == 0 {
		return []any{schemaOf("type", t)}
	}
	out := []any{schemaOf("type", t, "exclusiveMaximum", text[0])}
	for i := 1; i < len(text); i++ {
		out = append(out, schemaOf("type", t, "exclusiveMinimum", text[i-1], "exclusiveMaximum", text[i]))
	}
	return append(out, schemaOf("type", t, "exclusiveMinimum", text[len(text)-1]))
}

// hideAnnotations is a schema that holds where b holds but evaluates nothing, for the branches
// of a complement beside unevaluatedProperties or unevaluatedItems: its properties become
// hidden ones, its contains a condition that evaluates nothing, its prefixItems and items
// hidden ones, and so on down its applicators ($ref followed); additionalProperties,
// patternProperties and unevaluated* that are not true are refused.
func (c *compiler) hideAnnotations(b any, ptr string) (any, error) {
	return c.hide(b, ptr, 0)
}

func (c *compiler) hide(b any, ptr string, depth int) (any, error) {
	o, ok := b.(*Object)
	if !ok {
		return b, nil
	}
	if depth > 20 {
		return nil, errAt(ptr, "a negated schema nesting deeper than 20 beside unevaluatedProperties or unevaluatedItems is not supported")
	}
	out := &Object{Values: map[string]any{}}
	var conds []any
	var parts []any // subschemas to hold as allOf, their annotations hidden too
	for _, k := range o.Keys {
		v := o.Values[k]
		switch k {
		case "contains":
			// A contains that counts its items without evaluating them.
			cond := schemaOf("contains", v, hiddenCond, true)
			for _, m := range []string{"minContains", "maxContains"} {
				if x, ok := o.Get(m); ok {
					cond.Keys = append(cond.Keys, m)
					cond.Values[m] = x
				}
			}
			conds = append(conds, cond)
			continue
		case "minContains", "maxContains":
			continue
		case moreContains:
			for _, m := range v.([]any) {
				cond := without(m.(*Object), hiddenCond)
				cond.Keys = append(cond.Keys, hiddenCond)
				cond.Values[hiddenCond] = true
				conds = append(conds, cond)
			}
			continue
		case "properties", hiddenProperties:
			if old, ok := out.Get(hiddenProperties); ok {
				v, _ = mergeKeyword(hiddenProperties, old, v)
				out.Values[hiddenProperties] = v
				continue
			}
			k = hiddenProperties
		case "prefixItems", "items":
			hk := map[string]string{"prefixItems": hiddenPrefixItems, "items": hiddenItems}[k]
			if old, ok := out.Get(hk); ok {
				v, _ = mergeKeyword(hk, old, v)
				out.Values[hk] = v
				continue
			}
			k = hk
		case "patternProperties", "additionalProperties", "unevaluatedProperties", "unevaluatedItems":
			// true (for every pattern) constrains nothing: only its annotations, dropped here.
			trivial := v == true
			if pats, ok := v.(*Object); ok && k == "patternProperties" {
				trivial = true
				for _, p := range pats.Keys {
					if pats.Values[p] != true {
						trivial = false
					}
				}
			}
			if !trivial {
				return nil, errAt(ptr, "a negated %s beside unevaluatedProperties or unevaluatedItems is not supported", k)
			}
			continue
		case "allOf", "anyOf", "oneOf":
			list, ok := v.([]any)
			if !ok {
				return nil, errAt(ptr+"/"+k, "must be an array of schemas")
			}
			hidden := make([]any, len(list))
			for i, x := range list {
				h, err := c.hide(x, ptr+"/"+k, depth+1)
				if err != nil {
					return nil, err
				}
				hidden[i] = h
			}
			if k == "allOf" {
				parts = append(parts, hidden...)
				continue
			}
			v = hidden
		case "$ref", "$dynamicRef":
			target, _, err := c.resolve(o, ptr, k)
			if err != nil {
				return nil, err
			}
			h, err := c.hide(target, ptr+"/"+k, depth+1)
			if err != nil {
				return nil, err
			}
			parts = append(parts, h)
			continue
		case "if", "then", "else":
			h, err := c.hide(v, ptr+"/"+k, depth+1)
			if err != nil {
				return nil, err
			}
			v = h
		case "dependentSchemas":
			deps, ok := v.(*Object)
			if !ok {
				return nil, errAt(ptr+"/"+k, "must be an object of schemas")
			}
			hidden := &Object{Values: map[string]any{}}
			for _, name := range deps.Keys {
				h, err := c.hide(deps.Values[name], ptr+"/"+k, depth+1)
				if err != nil {
					return nil, err
				}
				hidden.Keys = append(hidden.Keys, name)
				hidden.Values[name] = h
			}
			v = hidden
		}
		out.Keys = append(out.Keys, k)
		out.Values[k] = v
	}
	if len(conds) > 0 {
		out.Keys = append(out.Keys, moreContains)
		out.Values[moreContains] = conds
	}
	if len(parts) > 0 {
		out.Keys = append(out.Keys, "allOf")
		out.Values["allOf"] = parts
	}
	return out, nil
}

// hasUnevaluated reports whether s has unevaluatedProperties or unevaluatedItems.
func hasUnevaluated(s *Object) bool {
	_, up := s.Get("unevaluatedProperties")
	_, ui := s.Get("unevaluatedItems")
	return up || ui
}

// anyOfSchemas is the schema that holds when one of list holds.
func anyOfSchemas(list []any) any {
	if len(list) == 1 {
		return list[0]
	}
	return schemaOf("anyOf", list)
}

// foldHiddenItems is s with its hidden prefixItems and items joined to its prefixItems and
// items (once unevaluatedItems has been rewritten, they constrain the same items).
func foldHiddenItems(s *Object) *Object {
	if _, ok := s.Get(hiddenPrefixItems); !ok {
		if _, ok := s.Get(hiddenItems); !ok {
			return s
		}
	}
	out := without(without(without(without(s, hiddenPrefixItems), hiddenItems), "prefixItems"), "items")
	hidden := &Object{Values: map[string]any{}}
	for k, hk := range map[string]string{"prefixItems": hiddenPrefixItems, "items": hiddenItems} {
		if v, ok := s.Get(hk); ok {
			hidden.add(k, v)
		}
	}
	mergeItems(out, []*Object{s, hidden})
	return out
}
