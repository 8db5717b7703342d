package jsonschema

import (
	"fmt"
	"slices"

	"github.com/loomlm/loom/constraint/grammar"
)

// MaxUnlisted bounds the required properties that properties does not list which an object
// may write in any order among its other properties (the states are the sets of them
// written); beyond it they are written in the order of required.
const MaxUnlisted = 8

// propsState is a point in an object's members: the next listed member to consider, the
// unlisted required properties written (a bit set), the properties written (capped where more
// no longer matter) and whether one has been written (a comma comes first then).
type propsState struct {
	next, seen, n int
	written       bool
}

// members is the body of an object, between its braces, as an automaton over its
// properties: the listed members in their order (each required or optional), then, in any
// order, the unlisted ones (each at most once, the required ones once) and other properties (extraKV, nil when none
// may appear), with minP to maxP properties in all (maxP < 0: no bound). nil when no object
// satisfies it.
func (c *compiler) members(listed, unlisted []member, extraKV grammar.Expr, minP, maxP int, ptr string) (grammar.Expr, error) {
	ws := c.baseRule("ws")
	comma := seq(ws, lit(","), ws)
	kv := func(m member) grammar.Expr { return seq(lit(quote(m.key)), ws, lit(":"), ws, m.value) }
	all := 0 // the unlisted properties that are required
	for j, m := range unlisted {
		if m.required {
			all |= 1 << j
		}
	}
	nCap := minP
	if maxP >= 0 {
		nCap = maxP
	}
	norm := func(s propsState) propsState {
		if maxP < 0 {
			s.n = min(s.n, nCap)
		}
		return s
	}
	type move struct {
		item grammar.Expr // nil: an empty move (an optional member left out)
		to   propsState
	}
	moves := map[propsState][]move{}
	start := propsState{}
	order := []propsState{start}
	moves[start] = nil
	for i := 0; i < len(order); i++ {
		s := order[i]
		var ms []move
		more := maxP < 0 || s.n < maxP
		write := func(item grammar.Expr, to propsState) {
			if more {
				to.n++
				to.written = true
				ms = append(ms, move{item, norm(to)})
			}
		}
		if s.next < len(listed) {
			m := listed[s.next]
			to := s
			to.next++
			write(kv(m), to)
			if !m.required {
				ms = append(ms, move{nil, to})
			}
		} else {
			for j, m := range unlisted {
				if s.seen&(1<<j) == 0 {
					to := s
					to.seen |= 1 << j
					write(kv(m), to)
				}
			}
			if extraKV != nil {
				write(extraKV, s)
			}
		}
		for _, m := range ms {
			if _, ok := moves[m.to]; !ok {
				if len(order) >= MaxCountStates {
					return nil, errAt(ptr, "the properties of this object need more than %d states", MaxCountStates)
				}
				moves[m.to] = nil
				order = append(order, m.to)
			}
		}
		moves[s] = ms
	}
	ends := func(s propsState) bool { return s.next == len(listed) && s.seen&all == all && s.n >= minP }
	live := map[propsState]bool{}
	for changed := true; changed; {
		changed = false
		for _, s := range order {
			if live[s] {
				continue
			}
			ok := ends(s)
			for _, m := range moves[s] {
				ok = ok || live[m.to]
			}
			if ok {
				live[s], changed = true, true
			}
		}
	}
	if !live[start] {
		return nil, nil
	}
	c.n++
	prefix := fmt.Sprintf("members-%d-", c.n)
	names := map[propsState]string{}
	for i, s := range order {
		names[s] = fmt.Sprintf("%s%d", prefix, i)
	}
	for _, s := range order {
		if !live[s] {
			continue
		}
		var alts []grammar.Expr
		if ends(s) {
			if s.written {
				alts = append(alts, ws)
			} else {
				alts = append(alts, seq())
			}
		}
		for _, m := range moves[s] {
			if !live[m.to] {
				continue
			}
			switch {
			case m.item == nil:
				alts = append(alts, ref(names[m.to]))
			case s.written:
				alts = append(alts, seq(comma, m.item, ref(names[m.to])))
			default:
				alts = append(alts, seq(m.item, ref(names[m.to])))
			}
		}
		c.rules = append(c.rules, grammar.Rule{Name: names[s], Body: alt(alts...)})
	}
	return ref(names[start]), nil
}

// MaxDependencies bounds the properties that dependentRequired and dependentSchemas name
// together: the object's schema becomes the union over which of them are present (2ⁿ
// branches).
const MaxDependencies = 6

// dependencies rewrites dependentRequired and dependentSchemas as a union over the presence
// of the properties they name: where a property is present, its dependencies are required
// and its schema holds; where absent, it may not appear. It reports whether it rewrote s.
func (c *compiler) dependencies(s *Object, ptr string) (any, bool, error) {
	dr, hasDR := s.Get("dependentRequired")
	ds, hasDS := s.Get("dependentSchemas")
	if !hasDR && !hasDS {
		return nil, false, nil
	}
	rest := without(without(s, "dependentRequired"), "dependentSchemas")
	var required []any
	if list, ok := rest.Values["required"].([]any); ok {
		required = list
	}
	// The parts that hold where each named property is present, in the order they are named.
	var names []string
	present := map[string][]any{}
	add := func(name string, part any) {
		if _, ok := present[name]; !ok {
			names = append(names, name)
		}
		present[name] = append(present[name], part)
	}
	if hasDR {
		o, ok := dr.(*Object)
		if !ok {
			return nil, false, errAt(ptr+"/dependentRequired", "must be an object of arrays of property names")
		}
		for _, k := range o.Keys {
			list, ok := o.Values[k].([]any)
			if !ok {
				return nil, false, errAt(ptr+"/dependentRequired/"+escapePointer(k), "must be an array of property names")
			}
			for _, x := range list {
				if _, ok := x.(string); !ok {
					return nil, false, errAt(ptr+"/dependentRequired/"+escapePointer(k), "must be an array of property names")
				}
			}
			if len(list) > 0 {
				add(k, schemaOf("required", list))
			}
		}
	}
	if hasDS {
		o, ok := ds.(*Object)
		if !ok {
			return nil, false, errAt(ptr+"/dependentSchemas", "must be an object of schemas")
		}
		for _, k := range o.Keys {
			if v := o.Values[k]; v != true {
				add(k, v)
			}
		}
	}
	if len(names) > MaxDependencies {
		return nil, false, errAt(ptr, "dependentRequired and dependentSchemas naming more than %d properties are not supported", MaxDependencies)
	}
	var branches []any
	for mask := 0; mask < 1<<len(names); mask++ {
		parts := []any{rest}
		skip := false
		for i, name := range names {
			if mask&(1<<i) != 0 {
				parts = append(parts, schemaOf("required", []any{name}))
				parts = append(parts, present[name]...)
			} else {
				if slices.Contains(required, any(name)) {
					skip = true // a required property is never absent
				}
				parts = append(parts, schemaOf("properties", schemaOf(name, false)))
			}
		}
		if skip {
			continue
		}
		b, err := c.merge(parts, ptr)
		if err != nil {
			return nil, false, err
		}
		branches = append(branches, b)
	}
	if len(branches) == 0 {
		return false, true, nil
	}
	return schemaOf("anyOf", branches), true, nil
}
