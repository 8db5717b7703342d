package jsonschema

import (
	"slices"

	"github.com/loomlm/loom/constraint/grammar"
)

// MaxUniqueArrays bounds the arrays uniqueItems true may enumerate.
const MaxUniqueArrays = 256

// finiteValues lists the values a schema accepts when they are a few scalars (null, booleans,
// and the scalar values of const and enum, within type); ok is false otherwise.
func finiteValues(node any, ptr string) ([]any, bool) {
	switch v := node.(type) {
	case bool:
		return nil, !v
	case *Object:
		for _, k := range v.Keys {
			if !annotations[k] && k != "type" && k != "enum" && k != "const" {
				return nil, false
			}
		}
		types, err := typesOf(v, ptr)
		if err != nil {
			return nil, false
		}
		var list []any
		switch c, e := v.Values["const"], v.Values["enum"]; {
		case c != nil || v.Keys != nil && slices.Contains(v.Keys, "const"):
			list = []any{c}
		case e != nil:
			l, ok := e.([]any)
			if !ok {
				return nil, false
			}
			list = l
		default:
			for _, t := range types {
				switch t {
				case "null":
					list = append(list, nil)
				case "boolean":
					list = append(list, false, true)
				default:
					return nil, false
				}
			}
			return list, true
		}
		var out []any
		var seen []string
		for _, x := range list {
			t := jsonType(x)
			if t == "object" || t == "array" {
				return nil, false
			}
			if !slices.Contains(types, t) && !(t == "integer" && slices.Contains(types, "number")) {
				continue
			}
			b, err := Marshal(x)
			if err != nil || slices.Contains(seen, string(b)) {
				continue
			}
			seen = append(seen, string(b))
			out = append(out, x)
		}
		return out, true
	}
	return nil, false
}

// uniqueArrays is the expression of the arrays of minN to maxN items whose items are
// distinct, each drawn from its position's finite values (prefix, then items): every such
// array, written out. nil when there are none; ok is false when they are more than
// MaxUniqueArrays.
func (c *compiler) uniqueArrays(values [][]any, rest []any, minN, maxN int) (grammar.Expr, bool) {
	ws := c.baseRule("ws")
	var alts []grammar.Expr
	var cur []string
	var walk func(i int) bool
	walk = func(i int) bool {
		if i >= minN {
			items := []grammar.Expr{lit("["), ws}
			for j, v := range cur {
				if j > 0 {
					items = append(items, ws, lit(","), ws)
				}
				items = append(items, lit(v))
			}
			if len(cur) > 0 {
				items = append(items, ws)
			}
			alts = append(alts, seq(append(items, lit("]"))...))
			if len(alts) > MaxUniqueArrays {
				return false
			}
		}
		if i == maxN {
			return true
		}
		vals := rest
		if i < len(values) {
			vals = values[i]
		}
		for _, v := range vals {
			b, _ := Marshal(v)
			if slices.Contains(cur, string(b)) {
				continue
			}
			cur = append(cur, string(b))
			ok := walk(i + 1)
			cur = cur[:len(cur)-1]
			if !ok {
				return false
			}
		}
		return true
	}
	if !walk(0) {
		return nil, false
	}
	return alt(alts...), true
}

// unique is an array under uniqueItems true, for the arrays where it is exact: at most one
// item (uniqueItems changes nothing), or items drawn from a few scalar values at every
// position with a bounded length, written out one array at a time (at most MaxUniqueArrays).
// Anything else is refused.
func (c *compiler) unique(s *Object, ptr string) (grammar.Expr, error) {
	minN, maxN, err := itemCounts(s, ptr)
	if err != nil {
		return nil, err
	}
	var prefix []any
	if v, ok := s.Get("prefixItems"); ok {
		prefix, _ = v.([]any)
	}
	items, hasItems := s.Get("items")
	if hasItems && items == false && (maxN < 0 || maxN > len(prefix)) {
		maxN = len(prefix)
	}
	if maxN >= 0 && maxN <= 1 {
		return c.array(without(s, "uniqueItems"), ptr)
	}
	if _, ok := s.Get("contains"); ok || maxN < 0 {
		return nil, errAt(ptr, "uniqueItems true is not supported (only over at most one item, or a bounded number of items drawn from a few scalar values)")
	}
	var values [][]any
	for i := 0; i < maxN && i < len(prefix); i++ {
		vals, ok := finiteValues(prefix[i], ptr)
		if !ok {
			return nil, errAt(ptr, "uniqueItems true is not supported (only over at most one item, or a bounded number of items drawn from a few scalar values)")
		}
		values = append(values, vals)
	}
	var rest []any
	if maxN > len(prefix) {
		node := any(true)
		if hasItems {
			node = items
		}
		vals, ok := finiteValues(node, ptr)
		if !ok {
			return nil, errAt(ptr, "uniqueItems true is not supported (only over at most one item, or a bounded number of items drawn from a few scalar values)")
		}
		rest = vals
	}
	e, ok := c.uniqueArrays(values, rest, minN, maxN)
	if !ok {
		return nil, errAt(ptr, "uniqueItems true over more than %d arrays is not supported", MaxUniqueArrays)
	}
	return e, nil
}
