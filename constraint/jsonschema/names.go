package jsonschema

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/regex"
)

// MaxPatternProperties bounds the patterns of one patternProperties: the names of other
// properties are split by the set of patterns they match, and each set is its own automaton.
const MaxPatternProperties = 6

// unanchored is a JSON Schema pattern as a regular expression of the whole string: JSON
// Schema patterns match anywhere unless anchored.
func unanchored(p string) string {
	re := p
	if !strings.HasPrefix(re, "^") {
		re = `(?s:.*)(?:` + re + `)`
	}
	if !strings.HasSuffix(p, "$") || strings.HasSuffix(p, `\$`) {
		re = `(?:` + re + `)(?s:.*)`
	}
	return re
}

// patternDFA is the automaton of the strings a JSON Schema pattern matches.
func patternDFA(v any, ptr string) (*regex.DFA, error) {
	p, ok := v.(string)
	if !ok {
		return nil, errAt(ptr, "must be a string")
	}
	d, err := regex.DFAOf(unanchored(p))
	if err != nil {
		return nil, errAt(ptr, "%v", err)
	}
	return d, nil
}

// stringKeywords are the keywords stringDFA reads.
var stringKeywords = set("type", "minLength", "maxLength", "pattern", "const", "enum", "format", notStrings)

// stringDFA is the automaton of the strings a schema accepts, for schemas whose keywords are
// string keywords (type, minLength, maxLength, pattern, format, const, enum, and the
// complements a notStrings lists) and annotations; all reports a schema that accepts every string (d is nil then)
// and d is nil with all false when it accepts none. Other keywords are refused.
func (c *compiler) stringDFA(node any, ptr, kw string) (d *regex.DFA, all bool, err error) {
	switch v := node.(type) {
	case bool:
		return nil, v, nil
	case *Object:
		var parts []*regex.DFA
		for _, k := range v.Keys {
			if annotations[k] {
				continue
			}
			if !stringKeywords[k] {
				return nil, false, errAt(ptr, "%s with keyword %q is not supported (only type, minLength, maxLength, pattern, format, const and enum)", kw, k)
			}
		}
		types, err := typesOf(v, ptr)
		if err != nil {
			return nil, false, err
		}
		if !slices.Contains(types, "string") {
			return nil, false, nil
		}
		minL, maxL := 0, -1
		for _, k := range []string{"minLength", "maxLength"} {
			x, ok := v.Get(k)
			if !ok {
				continue
			}
			n, _ := x.(json.Number)
			f, err := n.Float64()
			if err != nil || f < 0 || f != math.Trunc(f) {
				return nil, false, errAt(ptr+"/"+k, "must be a non-negative integer")
			}
			if f > regex.MaxStates {
				return nil, false, errAt(ptr+"/"+k, "%v is above the largest supported length here, %d", f, regex.MaxStates)
			}
			if k == "minLength" {
				minL = int(f)
			} else {
				maxL = int(f)
			}
		}
		if minL > 0 || maxL >= 0 {
			if maxL >= 0 && minL > maxL {
				return nil, false, nil
			}
			l, err := regex.Lengths(minL, maxL)
			if err != nil {
				return nil, false, errAt(ptr, "%v", err)
			}
			parts = append(parts, l)
		}
		if p, ok := v.Get("pattern"); ok {
			pd, err := patternDFA(p, ptr+"/pattern")
			if err != nil {
				return nil, false, err
			}
			parts = append(parts, pd)
		}
		if f, ok := v.Get("format"); ok && !c.opt.FormatAnnotation {
			name, _ := f.(string)
			re, ok := formats[name]
			if !ok {
				return nil, false, errAt(ptr+"/format", "format %v is not supported (supported: date, time, date-time, uuid, email, ipv4)", f)
			}
			fd, err := regex.DFAOf(re)
			if err != nil {
				return nil, false, errAt(ptr+"/format", "%v", err)
			}
			parts = append(parts, fd)
		}
		if x, ok := v.Get(notStrings); ok {
			for _, n := range x.([]any) {
				nd, nall, err := c.stringDFA(n, ptr, kw)
				if err != nil {
					return nil, false, err
				}
				if nall {
					return nil, false, nil
				}
				if nd == nil {
					continue
				}
				cd, err := regex.Complement(nd)
				if err != nil {
					return nil, false, errAt(ptr, "%s: %v", kw, err)
				}
				if cd == nil {
					return nil, false, nil
				}
				parts = append(parts, cd)
			}
		}
		for _, k := range []string{"const", "enum"} {
			x, ok := v.Get(k)
			if !ok {
				continue
			}
			list := []any{x}
			if k == "enum" {
				if list, ok = x.([]any); !ok {
					return nil, false, errAt(ptr+"/enum", "must be an array")
				}
			}
			var words []string
			for _, w := range list {
				if s, ok := w.(string); ok {
					words = append(words, s)
				}
			}
			if len(words) == 0 {
				return nil, false, nil
			}
			parts = append(parts, regex.Literals(words))
		}
		if len(parts) == 0 {
			return nil, true, nil
		}
		d, err := regex.Intersect(parts...)
		if err != nil {
			return nil, false, errAt(ptr, "%s: %v", kw, err)
		}
		return d, false, nil
	}
	return nil, false, errAt(ptr, "a schema must be an object or a boolean")
}

// stringExpr is a JSON string literal whose decoded value d accepts: the automaton's states
// become rules, their classes written as JSON writes them (escapeJSON).
func (c *compiler) stringExpr(d *regex.DFA) grammar.Expr {
	e, _ := c.stringRules(d)
	return e
}

// stringRules is stringExpr that also returns the names of the automaton's state rules (the
// first of them the entry).
func (c *compiler) stringRules(d *regex.DFA) (grammar.Expr, []string) {
	c.n++
	rules := d.Grammar(fmt.Sprintf("dfa-%d-", c.n))
	states := make([]string, len(d.States)) // the state rules come first, then shared classes
	for i := range rules {
		rules[i].Body = escapeJSON(rules[i].Body)
		if i < len(states) {
			states[i] = rules[i].Name
		}
	}
	c.rules = append(c.rules, rules...)
	return seq(lit(`"`), ref(rules[0].Name), lit(`"`)), states
}

// nameExpr is stringExpr for the names of properties matched by automata: the automaton's
// rules are also a regular group (grammar.Grammar.RegularGroups), so that at a name's first
// byte, where several names' automata are read at once and none loops yet, a token mask takes
// every prefix of a name as one slice. (A string value's automaton is read alone, with its
// loops' slices; the vocabulary pass a group's slice costs is not repaid there.)
func (c *compiler) nameExpr(d *regex.DFA) grammar.Expr {
	e, states := c.stringRules(d)
	c.regular = append(c.regular, states)
	return e
}

// patternProperty is one entry of patternProperties.
type patternProperty struct {
	dfa    *regex.DFA
	schema any
	ptr    string
}

// patternProps reads patternProperties.
func (c *compiler) patternProps(s *Object, ptr string) ([]patternProperty, error) {
	v, ok := s.Get("patternProperties")
	if !ok {
		return nil, nil
	}
	o, ok := v.(*Object)
	if !ok {
		return nil, errAt(ptr+"/patternProperties", "must be an object of schemas")
	}
	if len(o.Keys) > MaxPatternProperties {
		return nil, errAt(ptr+"/patternProperties", "more than %d patterns are not supported", MaxPatternProperties)
	}
	var out []patternProperty
	for _, p := range o.Keys {
		pptr := ptr + "/patternProperties/" + escapePointer(p)
		d, err := patternDFA(p, pptr)
		if err != nil {
			return nil, err
		}
		out = append(out, patternProperty{dfa: d, schema: o.Values[p], ptr: pptr})
	}
	return out, nil
}

// valueOf compiles the schema a property's value must satisfy: all of the schemas given (the
// property's own, those of the patterns its name matches, or additionalProperties).
func (c *compiler) valueOf(schemas []any, ptrs []string) (grammar.Expr, error) {
	switch len(schemas) {
	case 0:
		return c.baseRule("value"), nil
	case 1:
		return c.schema(schemas[0], ptrs[0])
	}
	merged, err := c.merge(schemas, ptrs[0])
	if err != nil {
		return nil, err
	}
	return c.schema(merged, ptrs[0])
}

// otherMembers is the expression of one property that is not listed (a name outside the
// listed ones, within propertyNames), with its value: the names are split by the set of
// patterns they match, each set with the schemas of its patterns (or additionalProperties
// for the names no pattern matches). nil when no such property may appear.
func (c *compiler) otherMembers(listed []string, names *regex.DFA, allNames bool, patterns []patternProperty, extra any, extraPtr string) (grammar.Expr, error) {
	ws := c.baseRule("ws")
	var comps []*regex.DFA
	comps = append(comps, regex.Literals(listed))
	if !allNames {
		if names == nil {
			return nil, nil
		}
		comps = append(comps, names)
	}
	base := len(comps)
	for _, p := range patterns {
		comps = append(comps, p.dfa)
	}
	outside := func(set uint64) bool { return set&1 == 0 && (allNames || set&2 != 0) }
	all, err := regex.Product(comps, outside)
	if err != nil {
		return nil, errAt(extraPtr, "property names: %v", err)
	}
	if all == nil {
		return nil, nil
	}
	// The sets of patterns that some name matches.
	order := []uint64{0}
	if len(patterns) > 0 {
		order = nil
		// Run the product again with acceptance by pattern set, to see which sets occur.
		seen := map[uint64]bool{}
		_, err := regex.Product(comps, func(set uint64) bool {
			if outside(set) {
				r := set >> base
				if !seen[r] {
					seen[r] = true
					order = append(order, r)
				}
			}
			return false
		})
		if err != nil {
			return nil, errAt(extraPtr, "property names: %v", err)
		}
		slices.Sort(order)
	}
	var alts []grammar.Expr
	for _, r := range order {
		var schemas []any
		var ptrs []string
		for i, p := range patterns {
			if r&(1<<i) != 0 {
				schemas = append(schemas, p.schema)
				ptrs = append(ptrs, p.ptr)
			}
		}
		if len(schemas) == 0 {
			schemas, ptrs = []any{extra}, []string{extraPtr}
		}
		value, err := c.valueOf(schemas, ptrs)
		if err != nil {
			return nil, err
		}
		if value == nil {
			continue
		}
		key := all
		if len(patterns) > 0 {
			want := r
			key, err = regex.Product(comps, func(set uint64) bool { return outside(set) && set>>base == want })
			if err != nil {
				return nil, errAt(extraPtr, "property names: %v", err)
			}
			if key == nil {
				continue
			}
		}
		alts = append(alts, seq(c.nameExpr(key), ws, lit(":"), ws, value))
	}
	return alt(alts...), nil
}
