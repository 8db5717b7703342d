// Package jsonschema compiles a JSON Schema (draft 2020-12) to a grammar (package grammar)
// whose sentences are JSON texts valid against the schema, so that constraint.Processor can
// hold generated output to it.
//
// What the grammar generates: compact JSON (or, with Options.FlexibleWhitespace, up to one
// newline and 20 blanks wherever JSON allows whitespace; with Options.OneSpace, at most one
// space there); object properties in the order the
// schema lists them (a listed property that is not required may be left out), then, where the
// schema allows them, other properties; numbers in their canonical form (see CanonicalNumber),
// with at most 40 digits before the point and 40 after it and an exponent of at most two
// digits, so that every number fits a float64 (the multiples of a multipleOf other than 1,
// without bounds, have no limit on their digits). A valid document written in another order or
// with other whitespace is still valid JSON for the schema, but not a sentence of the grammar:
// Marshal writes a decoded document in the grammar's form.
//
// Supported keywords: type (a name or a list), enum, const (beside other keywords, the values
// the rest of the schema accepts), properties, required (required properties that properties
// does not list are written among the other properties, in any order), additionalProperties
// (true, false or a schema; other properties are those with a name the schema does not list),
// patternProperties and propertyNames (names as regular languages: automata of the patterns,
// the listed names and propertyNames' string keywords), minProperties and maxProperties (by
// counting), items, prefixItems, minItems, maxItems, contains with minContains and maxContains
// (by counting the items that match; several allOf parts' each on its own), uniqueItems (true
// over at most one item, or over a bounded number of items drawn from a few scalar values),
// minLength, maxLength, pattern (Go's regexp syntax, unanchored as JSON Schema says; with a
// length or a format, the intersection of their automata), format (date, time, date-time, uuid,
// ipv4, and email with a local part of at most three dot-separated words of 20 characters and
// at most four domain labels of 31; other formats are refused), minimum, maximum,
// exclusiveMinimum and exclusiveMaximum (exact ranges on integers; on numbers, the plain
// decimals — no exponent — within the bounds' exact decimal values), multipleOf (any decimal,
// by the digits' remainder), anyOf, oneOf (exactly, each branch with the others' complements,
// where they can be written; otherwise as anyOf, and a document matching two branches is not
// rejected), allOf (its parts merged), not and if/then/else (where the complement of the
// negated schema can be written as a union of supported schemas; see complement),
// dependentRequired and dependentSchemas (a union over the presence of the properties they
// name), unevaluatedProperties and unevaluatedItems once $ref and allOf are merged (as
// additionalProperties and items, the items contains matches evaluated too; in each branch of
// anyOf, oneOf, if and not), $ref within the document (recursion included: "#", JSON pointers,
// and the URIs of subschemas with an $id, $anchor or $dynamicAnchor, resolved against the base
// URI the $ids set), $dynamicRef (resolved along the references followed while compiling, the
// dynamic scope), $defs and definitions. Annotations (title, description, $comment, default,
// examples, deprecated, readOnly, writeOnly, $id, $anchor, $dynamicAnchor, the content*
// keywords, $schema naming draft 2020-12) are accepted and change nothing. Expansions are
// bounded (MaxComplement, MaxDependencies, MaxPatternProperties, MaxAnyOfBeside, MaxContains,
// MaxUniqueArrays, MaxCountStates, MaxRules, regex.MaxStates): beyond a bound the schema is
// refused.
//
// Every other keyword of JSON Schema — uniqueItems true elsewhere, $ref to another document,
// $recursiveRef — and any combination this compiler cannot enforce exactly (the complement of
// items beside prefixItems or of patternProperties, two patternProperties in allOf, another
// meta-schema, …) is an error naming the keyword and the JSON pointer of its schema: a
// constraint is never silently dropped.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/regex"
)

// MaxSchemaBytes is the largest schema Compile reads.
const MaxSchemaBytes = 1 << 20

// MaxRules bounds the rules of a compiled grammar: the rewrites of if, not, dependencies and
// counted keywords multiply when nested, and a schema that needs more is refused.
const MaxRules = 50000

// Error is a schema that cannot be compiled: Pointer is the JSON pointer of the schema at
// fault ("" for the root), and Line and Col (1-based, columns in bytes; 0 when not known)
// where that schema, or the JSON syntax error, is in the text.
type Error struct {
	Pointer   string
	Msg       string
	Line, Col int
}

func (e *Error) Error() string {
	p := e.Pointer
	if p == "" {
		p = "(root)"
	}
	return "json schema at " + p + ": " + e.Msg
}

// Options change how a schema compiles; the zero value is loom's default.
type Options struct {
	// FormatAnnotation treats "format" as an annotation, as draft 2020-12 does by default;
	// otherwise (the default, as generation wants it) the formats listed in the package
	// documentation are asserted and any other format is an error.
	FormatAnnotation bool
	// FlexibleWhitespace lets the JSON have up to one newline and 20 spaces or tabs wherever
	// JSON allows whitespace; by default it has none (compact JSON, the fewest tokens, and no
	// room for a model to spin on blanks).
	FlexibleWhitespace bool
	// OneSpace lets the JSON have at most one space wherever JSON allows whitespace: the
	// form Python's json.dumps writes (", " and ": "), which chat templates write tool calls
	// in and models trained on them write back, with no room to spin on blanks.
	// FlexibleWhitespace, when also set, wins.
	OneSpace bool
}

// Compile compiles a schema given as JSON text.
func Compile(schema []byte, opt Options) (*grammar.CFG, error) {
	g, err := Translate(schema, opt)
	if err != nil {
		return nil, err
	}
	cfg, err := grammar.Compile(g, "root")
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	return cfg, nil
}

// Translate returns the grammar of a schema given as JSON text (start rule "root").
func Translate(schema []byte, opt Options) (*grammar.Grammar, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, &Error{Msg: fmt.Sprintf("the schema is %d bytes; at most %d are read", len(schema), MaxSchemaBytes)}
	}
	root, err := Decode(schema)
	if err != nil {
		e := &Error{Msg: "not valid JSON: " + err.Error()}
		e.Line, e.Col, _ = syntaxPosition(schema, err)
		return nil, e
	}
	g, err := translate(root, opt)
	var e *Error
	if errors.As(err, &e) && e.Line == 0 { // the schema at fault is found in the text by its pointer
		e.Line, e.Col, _ = Position(schema, e.Pointer)
	}
	return g, err
}

// translate returns the grammar of a decoded schema.
func translate(root any, opt Options) (*grammar.Grammar, error) {
	c := &compiler{root: root, res: newResources(root), opt: opt, refs: map[string]string{}, base: map[string]bool{}, entered: map[*Object][]string{}}
	body, err := c.schema(root, "")
	if err != nil {
		return nil, err
	}
	if body == nil {
		return nil, &Error{Msg: "the schema accepts nothing"}
	}
	rules := append([]grammar.Rule{{Name: "root", Body: body}}, c.rules...)
	for i := range rules {
		rules[i].Pos = grammar.Pos{Line: 1, Col: 1}
	}
	return &grammar.Grammar{Rules: rules, RegularGroups: c.regular}, nil
}

type compiler struct {
	root    any
	res     *resources
	scope   []string             // the dynamic scope, where the schema has a $dynamicRef
	entered map[*Object][]string // the resources the parts of a merged schema entered
	opt     Options
	rules   []grammar.Rule
	regular [][]string        // groups of rules of regular expressions' automata (stringExpr)
	refs    map[string]string // JSON pointer → rule of the schema there
	base    map[string]bool   // base rules added
	n       int
	depth   int
}

func errAt(ptr, format string, args ...any) error {
	return &Error{Pointer: ptr, Msg: fmt.Sprintf(format, args...)}
}

// Expression helpers.
func lit(s string) grammar.Expr              { return &grammar.Literal{Text: s} }
func seq(items ...grammar.Expr) grammar.Expr { return &grammar.Seq{Items: items} }
func ref(name string) grammar.Expr           { return &grammar.Ref{Name: name} }
func rep(e grammar.Expr, lo, hi int) grammar.Expr {
	return &grammar.Repeat{Expr: e, Min: lo, Max: hi}
}
func class(neg bool, rs ...rune) grammar.Expr {
	c := &grammar.Class{Negated: neg}
	for i := 0; i+1 < len(rs); i += 2 {
		c.Ranges = append(c.Ranges, grammar.RuneRange{Lo: rs[i], Hi: rs[i+1]})
	}
	return c
}
func alt(alts ...grammar.Expr) grammar.Expr {
	var out []grammar.Expr
	for _, a := range alts {
		if a != nil {
			out = append(out, a)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return &grammar.Alt{Alts: out}
}

// addRule adds a rule with a fresh name and returns a reference to it.
func (c *compiler) addRule(prefix string, body grammar.Expr) grammar.Expr {
	c.n++
	name := fmt.Sprintf("%s-%d", prefix, c.n)
	c.rules = append(c.rules, grammar.Rule{Name: name, Body: body})
	return ref(name)
}

// baseRule returns a reference to one of the fixed rules (ws, value, string, …), adding it
// the first time.
func (c *compiler) baseRule(name string) grammar.Expr {
	if !c.base[name] {
		c.base[name] = true
		var body grammar.Expr
		ws := ref("ws")
		switch name {
		case "ws":
			body = seq()
			switch {
			case c.opt.FlexibleWhitespace:
				blank := class(false, ' ', ' ', '\t', '\t')
				body = seq(rep(blank, 0, 20), rep(seq(lit("\n"), rep(blank, 0, 20)), 0, 1))
			case c.opt.OneSpace:
				body = rep(lit(" "), 0, 1)
			}
		case "char":
			body = alt(class(true, '"', '"', '\\', '\\', 0, 0x1f),
				seq(lit(`\`), alt(class(false, '"', '"', '\\', '\\', '/', '/', 'b', 'b', 'f', 'f', 'n', 'n', 'r', 'r', 't', 't'),
					seq(lit("u"), rep(class(false, '0', '9', 'a', 'f', 'A', 'F'), 4, 4)))))
		case "string":
			body = seq(lit(`"`), rep(c.baseRule("char"), 0, -1), lit(`"`))
		case "uint":
			body = alt(lit("0"), seq(class(false, '1', '9'), rep(class(false, '0', '9'), 0, 39)))
		case "integer":
			body = seq(rep(lit("-"), 0, 1), c.baseRule("uint"))
		case "fraction-exponent":
			body = seq(rep(seq(lit("."), rep(class(false, '0', '9'), 1, 40)), 0, 1),
				rep(seq(class(false, 'e', 'e', 'E', 'E'), rep(class(false, '-', '-', '+', '+'), 0, 1), rep(class(false, '0', '9'), 1, 2)), 0, 1))
		case "number":
			body = seq(c.baseRule("integer"), c.baseRule("fraction-exponent"))
		case "value":
			body = alt(c.baseRule("object"), c.baseRule("array"), c.baseRule("string"), c.baseRule("number"),
				lit("true"), lit("false"), lit("null"))
		case "object":
			member := seq(c.baseRule("string"), ws, lit(":"), ws, c.baseRule("value"))
			body = seq(lit("{"), ws, rep(seq(member, rep(seq(ws, lit(","), ws, member), 0, -1), ws), 0, 1), lit("}"))
		case "array":
			v := c.baseRule("value")
			body = seq(lit("["), ws, rep(seq(v, rep(seq(ws, lit(","), ws, v), 0, -1), ws), 0, 1), lit("]"))
		default:
			panic("unknown base rule " + name)
		}
		c.rules = append(c.rules, grammar.Rule{Name: name, Body: body})
		if name != "ws" {
			c.baseRule("ws")
		}
	}
	return ref(name)
}

// draft202012 is the meta-schema of JSON Schema draft 2020-12, the one loom implements.
const draft202012 = "https://json-schema.org/draft/2020-12/schema"

// Keywords.
var (
	annotations = set("title", "description", "$comment", "default", "examples", "deprecated", "readOnly", "writeOnly",
		"$schema", "$defs", "definitions", "contentMediaType", "contentEncoding", "contentSchema", "$id", "$anchor", "$dynamicAnchor")
	supported = set("unevaluatedProperties", "unevaluatedItems", "not", "type", "enum", "const", "properties", "required", "additionalProperties", "minProperties", "maxProperties",
		"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "format",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "$ref",
		"patternProperties", "propertyNames", "if", "then", "else", "contains", "minContains", "maxContains",
		"dependentRequired", "dependentSchemas", "$dynamicRef")
	unsupported = set(
		"dependencies",
		"$recursiveRef", "$recursiveAnchor", "$vocabulary", "additionalItems")
	allTypes = []string{"null", "boolean", "object", "array", "string", "number"}
)

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// schema returns the expression of the schema node at ptr, or nil when it accepts nothing.
func (c *compiler) schema(node any, ptr string) (grammar.Expr, error) {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > 200 {
		return nil, errAt(ptr, "schemas nest deeper than 200 (a $ref cycle through allOf?)")
	}
	if len(c.rules) > MaxRules {
		return nil, errAt(ptr, "the grammar has more than %d rules (expansions of if, not, dependencies and counts multiply)", MaxRules)
	}
	switch v := node.(type) {
	case bool:
		if v {
			return c.baseRule("value"), nil
		}
		return nil, nil
	case *Object:
		if c.res.hasDyn {
			// The dynamic scope: the schema resources entered, outermost first (for a merged
			// schema, those its parts entered).
			n := len(c.scope)
			bases := c.entered[v]
			if base, ok := c.res.baseOf[v]; ok {
				bases = append([]string{base.String()}, bases...)
			}
			for _, b := range bases {
				if !slices.Contains(c.scope, b) {
					c.scope = append(c.scope, b)
				}
			}
			defer func() { c.scope = c.scope[:n] }()
		}
		return c.object(v, ptr)
	}
	return nil, errAt(ptr, "a schema must be an object or a boolean, not %s", jsonType(node))
}

func (c *compiler) object(s *Object, ptr string) (grammar.Expr, error) {
	for _, k := range s.Keys {
		switch {
		case unsupported[k]:
			return nil, errAt(ptr, "keyword %q is not supported", k)
		case k == "$schema":
			// Another meta-schema may switch vocabularies off (and so keywords' meaning).
			if v, _ := s.Get(k); v != draft202012 && v != draft202012+"#" {
				return nil, errAt(ptr+"/$schema", "meta-schema %v is not supported (only %s)", v, draft202012)
			}
		}
	}
	unevaluatedHere := hasUnevaluated(s)
	// Combinators first: they distribute the sibling keywords over their branches.
	for _, kw := range []string{"$ref", "$dynamicRef"} {
		if _, ok := s.Get(kw); !ok {
			continue
		}
		target, tptr, err := c.resolve(s, ptr, kw)
		if err != nil {
			return nil, err
		}
		rest := without(s, kw)
		if !onlyAnnotations(rest) {
			merged, err := c.merge([]any{rest, target}, ptr)
			if err != nil {
				return nil, err
			}
			return c.schema(merged, ptr)
		}
		return c.refRule(target, tptr)
	}
	if v, ok := s.Get("allOf"); ok {
		parts, ok := v.([]any)
		if !ok || len(parts) == 0 {
			return nil, errAt(ptr+"/allOf", "must be a non-empty array of schemas")
		}
		merged, err := c.merge(append([]any{without(s, "allOf")}, parts...), ptr)
		if err != nil {
			return nil, err
		}
		return c.schema(merged, ptr)
	}
	if _, ok := s.Get("not"); ok {
		node, err := c.negate(s, ptr)
		if err != nil {
			return nil, err
		}
		return c.schema(node, ptr)
	}
	if _, ok := s.Get("if"); ok && !unevaluatedHere && inert(s, "if") {
		s = without(s, "if") // no then, no else, and nothing to evaluate
	}
	if _, ok := s.Get("if"); ok {
		node, err := c.conditional(s, ptr)
		if err != nil {
			return nil, err
		}
		return c.schema(node, ptr)
	}
	if node, ok, err := c.dependencies(s, ptr); err != nil {
		return nil, err
	} else if ok {
		return c.schema(node, ptr)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		v, ok := s.Get(kw)
		if !ok {
			continue
		}
		branches, ok := v.([]any)
		if !ok || len(branches) == 0 {
			return nil, errAt(ptr+"/"+kw, "must be a non-empty array of schemas")
		}
		rest := without(s, kw)
		bptrs := make([]string, len(branches))
		for i := range branches {
			bptrs[i] = fmt.Sprintf("%s/%s/%d", ptr, kw, i)
		}
		if kw == "anyOf" && unevaluatedHere && len(branches) > 1 {
			// The properties and items evaluated are those of every branch that matches: one
			// branch for each set of them, all of whose schemas hold.
			sets, err := branchSets(branches, ptr)
			if err != nil {
				return nil, err
			}
			branches = sets
			bptrs = make([]string, len(sets))
			for i := range sets {
				bptrs[i] = ptr + "/anyOf"
			}
		}
		if kw == "oneOf" && len(branches) > 1 {
			// Exactly one branch: each with the complements of the others, where they can be
			// written; otherwise oneOf stays anyOf (a document matching two branches is not
			// rejected, as documented).
			if exact, eptrs, ok := c.exactlyOne(branches, bptrs, unevaluatedHere); ok {
				branches, bptrs = exact, eptrs
			}
		}
		var alts []grammar.Expr
		for i, b := range branches {
			bptr := bptrs[i]
			node := b
			if !onlyAnnotations(rest) {
				m, err := c.merge([]any{rest, b}, bptr)
				if err != nil {
					return nil, err
				}
				node = m
			}
			e, err := c.schema(node, bptr)
			if err != nil {
				return nil, err
			}
			alts = append(alts, e)
		}
		return alt(alts...), nil
	}
	if node, ok, err := unevaluated(s, ptr); err != nil {
		return nil, err
	} else if ok {
		return c.schema(node, ptr)
	}
	if v, ok := s.Get("enum"); ok {
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return nil, errAt(ptr+"/enum", "must be a non-empty array")
		}
		return c.values(s, list, ptr, "enum")
	}
	if v, ok := s.Get("const"); ok {
		return c.values(s, []any{v}, ptr, "const")
	}
	types, err := typesOf(s, ptr)
	if err != nil {
		return nil, err
	}
	var alts []grammar.Expr
	for _, t := range types {
		e, err := c.typed(s, t, ptr)
		if err != nil {
			return nil, err
		}
		alts = append(alts, e)
	}
	return alt(alts...), nil
}

// unevaluated rewrites unevaluatedProperties and unevaluatedItems once the applicators are
// gone ($ref and allOf merged into the schema, whose parts' properties and items count as
// evaluated; anyOf and oneOf are refused beside them, since a branch alone does not see what
// another matching branch evaluated): with no applicator left, the properties evaluated are
// those of properties and additionalProperties, so unevaluatedProperties acts as
// additionalProperties (and as nothing beside one); the items evaluated are those of
// prefixItems and items, so unevaluatedItems acts as items (and as nothing beside one). It
// reports whether it rewrote s.
func unevaluated(s *Object, ptr string) (any, bool, error) {
	up, hasUP := s.Get("unevaluatedProperties")
	ui, hasUI := s.Get("unevaluatedItems")
	if !hasUP && !hasUI {
		return nil, false, nil
	}
	out := s
	if hasUP {
		out = without(out, "unevaluatedProperties")
		if _, ok := out.Get("additionalProperties"); !ok {
			out.Keys = append(out.Keys, "additionalProperties")
			out.Values["additionalProperties"] = up
		}
	}
	if hasUI {
		out = without(out, "unevaluatedItems")
		if _, ok := out.Get("items"); !ok {
			// The items contains matches are evaluated too (whatever minContains says).
			if c, ok := out.Get("contains"); ok {
				list := []any{c}
				if more, ok := out.Values[moreContains].([]any); ok {
					for _, m := range more {
						if _, hidden := m.(*Object).Get(hiddenCond); !hidden {
							list = append(list, m.(*Object).Values["contains"])
						}
					}
				}
				ui = schemaOf("anyOf", append(list, ui))
			}
			out.Keys = append(out.Keys, "items")
			out.Values["items"] = ui
		}
	}
	return out, true, nil
}

// exactlyOne rewrites the branches of a oneOf as branches of which a document matches one at
// most: branch i merged with one branch of each other branch's complement, for every choice
// (at most MaxComplement in all). It reports false where a complement cannot be written or
// the branches would be too many.
func (c *compiler) exactlyOne(branches []any, ptrs []string, hide bool) ([]any, []string, bool) {
	comps := make([][]any, len(branches))
	for j, b := range branches {
		bad, err := c.complement(b, ptrs[j])
		if err != nil {
			return nil, nil, false
		}
		if hide {
			for k := range bad {
				if bad[k], err = c.hideAnnotations(bad[k], ptrs[j]); err != nil {
					return nil, nil, false
				}
			}
		}
		comps[j] = bad
	}
	var out []any
	var outPtrs []string
	for i, b := range branches {
		acc := []any{b}
		for j := range branches {
			if j == i {
				continue
			}
			var next []any
			for _, x := range acc {
				for _, y := range comps[j] {
					m, err := c.merge([]any{x, y}, ptrs[i])
					if err != nil {
						return nil, nil, false
					}
					if m != false {
						next = append(next, m)
					}
				}
			}
			if len(out)+len(next) > MaxComplement {
				return nil, nil, false
			}
			acc = next
		}
		for range acc {
			outPtrs = append(outPtrs, ptrs[i])
		}
		out = append(out, acc...)
	}
	if len(out) == 0 {
		return []any{false}, []string{ptrs[0]}, true
	}
	return out, outPtrs, true
}

// MaxAnyOfBeside bounds the branches of an anyOf beside unevaluatedProperties or
// unevaluatedItems: each set of branches that may match together is a branch (2ⁿ − 1).
const MaxAnyOfBeside = 4

// branchSets is, for the branches of an anyOf, one schema per non-empty set of them (all of
// its branches as allOf).
func branchSets(branches []any, ptr string) ([]any, error) {
	if len(branches) > MaxAnyOfBeside {
		return nil, errAt(ptr+"/anyOf", "anyOf of more than %d branches beside unevaluatedProperties or unevaluatedItems is not supported", MaxAnyOfBeside)
	}
	var out []any
	for mask := 1; mask < 1<<len(branches); mask++ {
		var parts []any
		for i, b := range branches {
			if mask&(1<<i) != 0 {
				parts = append(parts, b)
			}
		}
		if len(parts) == 1 {
			out = append(out, parts[0])
		} else {
			out = append(out, schemaOf("allOf", parts))
		}
	}
	return out, nil
}

// conditional rewrites if/then/else as the union (if ∧ then) ∨ (¬if ∧ else), with ¬if the
// union complement gives (refused where it cannot be written); a missing then or else is
// true. The union becomes the schema's anyOf, so the other keywords hold in every branch.
func (c *compiler) conditional(s *Object, ptr string) (any, error) {
	cond := s.Values["if"]
	rest := without(without(without(s, "if"), "then"), "else")
	then, ok := s.Get("then")
	if !ok {
		then = true
	}
	els, ok := s.Get("else")
	if !ok {
		els = true
	}
	notCond, err := c.complement(cond, ptr+"/if")
	if err != nil {
		return nil, err
	}
	// Every branch writes the properties that the schema, if, then and else list in one
	// order, the one Order gives: a branch where if fails still writes if's properties in
	// their place (hidden ones, evaluating nothing).
	var position *Object
	if names := c.res.listedNames(s, 0); len(names) > 0 {
		hide := &Object{Values: map[string]any{}}
		var list []any
		for _, k := range names {
			hide.Keys = append(hide.Keys, k)
			hide.Values[k] = true
			list = append(list, k)
		}
		position = schemaOf(hiddenProperties, hide, propertyOrder, list)
	}
	withPosition := func(parts ...any) []any {
		if position != nil {
			return append(parts, position)
		}
		return parts
	}
	// The schema's other keywords are merged into each branch (part 0, so that its
	// unevaluated* sees what if and then, or else, evaluate; the complement evaluates nothing).
	var branches []any
	first, err := c.merge(withPosition(rest, cond, then), ptr+"/then")
	if err != nil {
		return nil, err
	}
	branches = append(branches, first)
	for _, n := range notCond {
		if hasUnevaluated(rest) {
			if n, err = c.hideAnnotations(n, ptr+"/if"); err != nil {
				return nil, err
			}
		}
		b, err := c.merge(withPosition(rest, n, els), ptr+"/else")
		if err != nil {
			return nil, err
		}
		branches = append(branches, b)
	}
	return schemaOf("anyOf", branches), nil
}

// negate rewrites a schema with "not" as one without it, for the negations a grammar can
// hold exactly: a boolean, a schema of annotations only (everything), another "not" (double
// negation), or "type" (the other types). Any other negated schema is refused.
func (c *compiler) negate(s *Object, ptr string) (any, error) {
	v, _ := s.Get("not")
	rest := without(s, "not")
	switch n := v.(type) {
	case bool:
		if n {
			return false, nil
		}
		return rest, nil
	case *Object:
		switch {
		case onlyAnnotations(n):
			return false, nil
		case onlyAnnotations(without(n, "not")):
			inner := n.Values["not"]
			if hasUnevaluated(rest) {
				var err error
				if inner, err = c.hideAnnotations(inner, ptr+"/not/not"); err != nil {
					return nil, err
				}
			}
			return c.merge([]any{rest, inner}, ptr)
		case onlyAnnotations(without(n, "type")):
			excluded, err := typesOf(n, ptr+"/not")
			if err != nil {
				return nil, err
			}
			allowed, err := typesOf(rest, ptr)
			if err != nil {
				return nil, err
			}
			var keep []any
			for _, t := range allowed {
				switch {
				case slices.Contains(excluded, t),
					t == "integer" && slices.Contains(excluded, "number"):
				case t == "number" && slices.Contains(excluded, "integer"):
					if _, ok := rest.Get("multipleOf"); !ok {
						keep = append(keep, t)
						rest = without(rest, notIntegers)
						rest.Keys = append(rest.Keys, notIntegers)
						rest.Values[notIntegers] = true
					}
				default:
					keep = append(keep, t)
				}
			}
			if len(keep) == 0 {
				return false, nil
			}
			out := without(rest, "type")
			out.Keys = append(out.Keys, "type")
			out.Values["type"] = keep
			return out, nil
		}
		bad, err := c.complement(n, ptr+"/not")
		if err != nil {
			return nil, err
		}
		var branches []any
		for _, b := range bad {
			if hasUnevaluated(rest) {
				if b, err = c.hideAnnotations(b, ptr+"/not"); err != nil {
					return nil, err
				}
			}
			m, err := c.merge([]any{rest, b}, ptr+"/not")
			if err != nil {
				return nil, err
			}
			branches = append(branches, m)
		}
		if len(branches) == 0 {
			return false, nil
		}
		return schemaOf("anyOf", branches), nil
	}
	return nil, errAt(ptr+"/not", "must be a schema")
}

// typesOf lists the types a schema allows ("integer" only when "number" is not allowed).
func typesOf(s *Object, ptr string) ([]string, error) {
	v, ok := s.Get("type")
	if !ok {
		return allTypes, nil
	}
	var names []string
	switch v := v.(type) {
	case string:
		names = []string{v}
	case []any:
		for _, x := range v {
			n, ok := x.(string)
			if !ok {
				return nil, errAt(ptr+"/type", "must list type names")
			}
			names = append(names, n)
		}
	default:
		return nil, errAt(ptr+"/type", "must be a type name or a list of them")
	}
	var out []string
	for _, n := range names {
		switch n {
		case "null", "boolean", "object", "array", "string", "number":
		case "integer":
			if slices.Contains(names, "number") {
				continue
			}
		default:
			return nil, errAt(ptr+"/type", "unknown type %q", n)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// values is an enum or const: the listed values of the allowed types, each written in
// canonical form.
func (c *compiler) values(s *Object, list []any, ptr, kw string) (grammar.Expr, error) {
	if rest := without(s, kw); !onlyAnnotations(without(rest, "type")) {
		// Other keywords: keep the values the rest of the schema accepts.
		ok, err := c.admits(rest, ptr, list)
		if err != nil {
			return nil, err
		}
		var kept []any
		for i, v := range list {
			if ok[i] {
				kept = append(kept, v)
			}
		}
		list = kept
	}
	types, err := typesOf(s, ptr)
	if err != nil {
		return nil, err
	}
	var alts []grammar.Expr
	var seen []string
	for _, v := range list {
		t := jsonType(v)
		ok := slices.Contains(types, t) || (t == "integer" && slices.Contains(types, "number"))
		if !ok {
			continue
		}
		b, err := Marshal(v)
		if err != nil {
			return nil, errAt(ptr+"/"+kw, "%v", err)
		}
		if slices.Contains(seen, string(b)) {
			continue
		}
		seen = append(seen, string(b))
		alts = append(alts, lit(string(b)))
	}
	return alt(alts...), nil
}

// admits reports which values the schema s accepts: s is compiled alone and each value,
// written in the grammar's form, is run through it.
func (c *compiler) admits(s *Object, ptr string, values []any) ([]bool, error) {
	sub := &compiler{root: c.root, res: c.res, scope: c.scope, entered: c.entered, opt: c.opt, refs: map[string]string{}, base: map[string]bool{}, depth: c.depth}
	body, err := sub.schema(s, ptr)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(values))
	if body == nil {
		return out, nil
	}
	rules := append([]grammar.Rule{{Name: "root", Body: body}}, sub.rules...)
	for i := range rules {
		rules[i].Pos = grammar.Pos{Line: 1, Col: 1}
	}
	cfg, err := grammar.Compile(&grammar.Grammar{Rules: rules}, "root")
	if err != nil {
		return nil, errAt(ptr, "%v", err)
	}
	o := orderer{root: c.root, res: c.res}
	for i, v := range values {
		doc, err := Marshal(o.order(s, v, 0))
		if err != nil {
			return nil, errAt(ptr, "%v", err)
		}
		m := earley.New(cfg)
		ok := true
		for _, b := range doc {
			if !m.Advance(b) {
				ok = false
				break
			}
		}
		out[i] = ok && m.IsAccepting()
	}
	return out, nil
}

// typed is the expression of one type with the keywords that apply to it.
func (c *compiler) typed(s *Object, t, ptr string) (grammar.Expr, error) {
	switch t {
	case "null":
		return lit("null"), nil
	case "boolean":
		return alt(lit("true"), lit("false")), nil
	case "integer", "number":
		return c.number(s, t == "integer", ptr)
	case "string":
		return c.str(s, ptr)
	case "array":
		return c.array(s, ptr)
	case "object":
		return c.obj(s, ptr)
	}
	return nil, errAt(ptr, "unknown type %q", t)
}

// numberKeyword reads a numeric keyword.
func numberKeyword(s *Object, kw, ptr string) (float64, bool, error) {
	v, ok := s.Get(kw)
	if !ok {
		return 0, false, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false, errAt(ptr+"/"+kw, "must be a number")
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		return 0, false, errAt(ptr+"/"+kw, "%s is out of range", n)
	}
	return f, true, nil
}

// exactBounds reads minimum, exclusiveMinimum, maximum and exclusiveMaximum as exact
// decimals and returns the tighter bound of each side.
func exactBounds(s *Object, ptr string) (lo, hi bound, err error) {
	lo, hi = bound{inf: true}, bound{inf: true}
	for _, kw := range []struct {
		name       string
		upper, inc bool
	}{{"minimum", false, true}, {"exclusiveMinimum", false, false}, {"maximum", true, true}, {"exclusiveMaximum", true, false}} {
		v, ok := s.Get(kw.name)
		if !ok {
			continue
		}
		n, _ := v.(json.Number)
		b, err := parseBound(n, kw.inc)
		if err != nil {
			return lo, hi, errAt(ptr+"/"+kw.name, "%v", err)
		}
		if kw.upper {
			if hi.inf || b.v.Cmp(hi.v) < 0 || b.v.Cmp(hi.v) == 0 && !b.inc {
				hi = b
			}
		} else if lo.inf || b.v.Cmp(lo.v) > 0 || b.v.Cmp(lo.v) == 0 && !b.inc {
			lo = b
		}
	}
	return lo, hi, nil
}

func (c *compiler) number(s *Object, integer bool, ptr string) (grammar.Expr, error) {
	if _, ok := s.Get(notIntegers); ok {
		if integer {
			return nil, nil
		}
		// A plain decimal whose fraction does not end in 0, or a mantissa times a negative
		// power of ten: never an integer.
		digits := class(false, '0', '9')
		nonzero := class(false, '1', '9')
		plain := seq(rep(lit("-"), 0, 1), alt(lit("0"), seq(nonzero, rep(digits, 0, 39))), lit("."), rep(digits, 0, 39), nonzero)
		tiny := seq(rep(lit("-"), 0, 1), nonzero, rep(seq(lit("."), rep(digits, 0, 39), nonzero), 0, 1), lit("e-"), rep(digits, 0, 1), nonzero)
		rest := without(s, notIntegers)
		constrained := false
		for _, k := range []string{"multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if _, ok := rest.Get(k); ok {
				constrained = true
			}
		}
		if !constrained {
			return c.addRule("fraction", alt(plain, tiny)), nil
		}
		// With bounds or multipleOf: the plain decimals they allow, with a fraction.
		base, err := c.number(rest, false, ptr)
		if base == nil || err != nil {
			return nil, err
		}
		return c.intersectNumbers(base, plain, ptr)
	}
	if v, ok := s.Get(notMultipleOf); ok {
		m, err := multipleOf(v, ptr)
		if err != nil {
			return nil, err
		}
		base, err := c.number(without(s, notMultipleOf), integer, ptr)
		if base == nil || err != nil {
			return nil, err
		}
		return c.nonMultiples(base, m, ptr)
	}
	if v, ok := s.Get("multipleOf"); ok {
		m, err := multipleOf(v, ptr)
		if err != nil {
			return nil, err
		}
		if m.Cmp(big.NewRat(1, 1)) != 0 {
			rest := without(s, "multipleOf")
			var base grammar.Expr // nil: no bounds
			for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
				if _, ok := s.Get(k); ok {
					if base, err = c.number(rest, integer, ptr); base == nil || err != nil {
						return nil, err
					}
					break
				}
			}
			return c.multiples(base, m, integer, ptr)
		}
		integer = true
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if f, ok, err := numberKeyword(s, "minimum", ptr); err != nil {
		return nil, err
	} else if ok {
		lo = f
	}
	if f, ok, err := numberKeyword(s, "maximum", ptr); err != nil {
		return nil, err
	} else if ok {
		hi = f
	}
	exLo, exHi := false, false
	if f, ok, err := numberKeyword(s, "exclusiveMinimum", ptr); err != nil {
		return nil, err
	} else if ok && f >= lo {
		lo, exLo = f, true
	}
	if f, ok, err := numberKeyword(s, "exclusiveMaximum", ptr); err != nil {
		return nil, err
	} else if ok && f <= hi {
		hi, exHi = f, true
	}
	bounded := !math.IsInf(lo, -1) || !math.IsInf(hi, 1)
	if !integer {
		switch {
		case !bounded:
			return c.baseRule("number"), nil
		case lo == 0 && !exLo && math.IsInf(hi, 1):
			// Non-negative: no minus sign.
			return seq(c.baseRule("uint"), c.baseRule("fraction-exponent")), nil
		}
		lb, ub, err := exactBounds(s, ptr)
		if err != nil {
			return nil, err
		}
		r := decimalRange(lb, ub)
		if r == nil {
			return nil, nil
		}
		return c.addRule("decimal-range", r), nil
	}
	if !bounded {
		return c.baseRule("integer"), nil
	}
	// Integer bounds: the integers in [ilo, ihi].
	const limit = 1 << 53
	var ilo, ihi int64 = math.MinInt64, math.MaxInt64
	if !math.IsInf(lo, -1) {
		b := math.Ceil(lo)
		if exLo && b == lo {
			b++
		}
		if math.Abs(b) > limit {
			return nil, errAt(ptr, "integer bound %v is beyond ±2^53", lo)
		}
		ilo = int64(b)
	}
	if !math.IsInf(hi, 1) {
		b := math.Floor(hi)
		if exHi && b == hi {
			b--
		}
		if math.Abs(b) > limit {
			return nil, errAt(ptr, "integer bound %v is beyond ±2^53", hi)
		}
		ihi = int64(b)
	}
	if ilo > ihi {
		return nil, nil
	}
	return c.addRule("int-range", intRange(ilo, ihi)), nil
}

func (c *compiler) str(s *Object, ptr string) (grammar.Expr, error) {
	minL, maxL := 0, -1
	for _, kw := range []string{"minLength", "maxLength"} {
		v, ok := s.Get(kw)
		if !ok {
			continue
		}
		n, ok := v.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || f < 0 || f != math.Trunc(f) {
			return nil, errAt(ptr+"/"+kw, "must be a non-negative integer")
		}
		if f > grammar.MaxRepeat {
			return nil, errAt(ptr+"/"+kw, "%v is above the largest supported length %d", f, grammar.MaxRepeat)
		}
		if kw == "minLength" {
			minL = int(f)
		} else {
			maxL = int(f)
		}
	}
	if maxL >= 0 && minL > maxL {
		return nil, nil
	}
	pattern, hasPattern := s.Get("pattern")
	format, hasFormat := s.Get("format")
	if c.opt.FormatAnnotation {
		hasFormat = false
	}
	lengths := minL > 0 || maxL >= 0
	if _, neg := s.Get(notStrings); neg || (hasPattern || hasFormat) && (lengths || hasPattern && hasFormat) {
		// Several string languages at once: the intersection of their automata.
		part := schemaOf("type", "string")
		for _, k := range []string{"minLength", "maxLength", "pattern", "format", notStrings} {
			if v, ok := s.Get(k); ok && (k != "format" || hasFormat) {
				part.Keys = append(part.Keys, k)
				part.Values[k] = v
			}
		}
		d, all, err := c.stringDFA(part, ptr, "a string schema")
		switch {
		case err != nil:
			return nil, err
		case all:
			return c.baseRule("string"), nil
		case d == nil:
			return nil, nil
		}
		return c.stringExpr(d), nil
	}
	if hasFormat {
		f, ok := format.(string)
		if !ok {
			return nil, errAt(ptr+"/format", "must be a string")
		}
		re, ok := formats[f]
		if !ok {
			return nil, errAt(ptr+"/format", "format %q is not supported (supported: date, time, date-time, uuid, email, ipv4)", f)
		}
		if lengths {
			return nil, errAt(ptr, "format together with minLength or maxLength is not supported")
		}
		return c.pattern(re, ptr+"/format")
	}
	if hasPattern {
		p, ok := pattern.(string)
		if !ok {
			return nil, errAt(ptr+"/pattern", "must be a string")
		}
		// JSON Schema patterns are not anchored: they match anywhere in the string.
		re := p
		if !strings.HasPrefix(re, "^") {
			re = `(?s:.*)(?:` + re + `)`
		}
		if !strings.HasSuffix(p, "$") || strings.HasSuffix(p, `\$`) {
			re = `(?:` + re + `)(?s:.*)`
		}
		return c.pattern(re, ptr+"/pattern")
	}
	if !lengths {
		return c.baseRule("string"), nil
	}
	return seq(lit(`"`), rep(c.baseRule("char"), minL, maxL), lit(`"`)), nil
}

// formats are the regular expressions of the supported formats.
var formats = map[string]string{
	"date":      `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`,
	"time":      `^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`,
	"date-time": `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
	"email":     `^[A-Za-z0-9!#$%&'*+/=?^_{|}~-]{1,20}(\.[A-Za-z0-9!#$%&'*+/=?^_{|}~-]{1,20}){0,2}@[A-Za-z0-9]([A-Za-z0-9-]{0,29}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,29}[A-Za-z0-9])?){0,3}$`,
	"ipv4":      `^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$`,
}

// pattern is a JSON string whose decoded value matches re in full.
func (c *compiler) pattern(re, ptr string) (grammar.Expr, error) {
	g, err := regex.Parse(re)
	if err != nil {
		return nil, errAt(ptr, "%v", err)
	}
	body := escapeJSON(g.Rules[0].Body)
	return seq(lit(`"`), c.addRule("pattern", body), lit(`"`)), nil
}

func (c *compiler) array(s *Object, ptr string) (grammar.Expr, error) {
	s = foldHiddenItems(s)
	if v, ok := s.Get("uniqueItems"); ok && v != false {
		return c.unique(s, ptr)
	}
	_, has := s.Get("contains")
	if _, more := s.Get(moreContains); has || more {
		return c.containsArray(s, ptr)
	}
	minN, maxN := 0, -1
	for _, kw := range []string{"minItems", "maxItems"} {
		v, ok := s.Get(kw)
		if !ok {
			continue
		}
		n, ok := v.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || f < 0 || f != math.Trunc(f) {
			return nil, errAt(ptr+"/"+kw, "must be a non-negative integer")
		}
		if f > grammar.MaxRepeat {
			return nil, errAt(ptr+"/"+kw, "%v is above the largest supported count %d", f, grammar.MaxRepeat)
		}
		if kw == "minItems" {
			minN = int(f)
		} else {
			maxN = int(f)
		}
	}
	if maxN >= 0 && minN > maxN {
		return nil, nil
	}
	var prefix []grammar.Expr
	if v, ok := s.Get("prefixItems"); ok {
		list, ok := v.([]any)
		if !ok {
			return nil, errAt(ptr+"/prefixItems", "must be an array of schemas")
		}
		for i, p := range list {
			e, err := c.schema(p, fmt.Sprintf("%s/prefixItems/%d", ptr, i))
			if err != nil {
				return nil, err
			}
			if e == nil { // no document has an item here: the array stops before it
				if maxN < 0 || maxN > i {
					maxN = i
				}
				break
			}
			prefix = append(prefix, e)
		}
	}
	var items grammar.Expr = c.baseRule("value")
	if v, ok := s.Get("items"); ok {
		e, err := c.schema(v, ptr+"/items")
		if err != nil {
			return nil, err
		}
		items = e
	}
	if maxN >= 0 && maxN < len(prefix) {
		prefix = prefix[:maxN]
	}
	if items == nil && (maxN < 0 || maxN > len(prefix)) {
		maxN = len(prefix)
	}
	if maxN >= 0 && minN > maxN {
		return nil, nil
	}
	ws := c.baseRule("ws")
	comma := seq(ws, lit(","), ws)
	// tail(i): the items from position i on, each after a comma.
	var tail func(i int) grammar.Expr
	tail = func(i int) grammar.Expr {
		if i >= len(prefix) {
			if items == nil {
				return seq()
			}
			lo := max(minN-i, 0)
			hi := -1
			if maxN >= 0 {
				hi = maxN - i
			}
			return rep(seq(comma, items), lo, hi)
		}
		var stop grammar.Expr
		if i >= minN {
			stop = seq()
		}
		var more grammar.Expr
		if maxN < 0 || i < maxN {
			more = seq(comma, prefix[i], tail(i+1))
		}
		return c.addRule("items", alt(more, stop))
	}
	var first grammar.Expr
	switch {
	case len(prefix) > 0:
		first = seq(prefix[0], tail(1))
	case items != nil && (maxN < 0 || maxN > 0):
		first = seq(items, tail(1))
	}
	if first == nil {
		return seq(lit("["), ws, lit("]")), nil
	}
	var body grammar.Expr = seq(first, ws)
	if minN == 0 {
		body = rep(body, 0, 1)
	}
	return seq(lit("["), ws, body, lit("]")), nil
}

// member is one listed property.
type member struct {
	key      string
	value    grammar.Expr
	required bool
}

func (c *compiler) obj(s *Object, ptr string) (grammar.Expr, error) {
	var required []string
	if v, ok := s.Get("required"); ok {
		list, ok := v.([]any)
		if !ok {
			return nil, errAt(ptr+"/required", "must be an array of property names")
		}
		for _, x := range list {
			k, ok := x.(string)
			if !ok {
				return nil, errAt(ptr+"/required", "must be an array of property names")
			}
			if !slices.Contains(required, k) {
				required = append(required, k)
			}
		}
	}
	patterns, err := c.patternProps(s, ptr)
	if err != nil {
		return nil, err
	}
	names, allNames := (*regex.DFA)(nil), true
	if v, ok := s.Get("propertyNames"); ok {
		if names, allNames, err = c.stringDFA(v, ptr+"/propertyNames", "propertyNames"); err != nil {
			return nil, err
		}
	}
	// allowed reports whether propertyNames allows the name k.
	allowed := func(k string) bool { return allNames || names != nil && names.Match(k) }
	// matching are the schemas of the patterns that match k, with their pointers.
	matching := func(k string) ([]any, []string) {
		var schemas []any
		var ptrs []string
		for _, p := range patterns {
			if p.dfa.Match(k) {
				schemas = append(schemas, p.schema)
				ptrs = append(ptrs, p.ptr)
			}
		}
		return schemas, ptrs
	}
	extraNode, ok := s.Get("additionalProperties")
	if !ok {
		extraNode = true
	}
	extraPtr := ptr + "/additionalProperties"
	simple := len(patterns) == 0 && allNames
	var extra grammar.Expr
	if simple {
		if extra, err = c.schema(extraNode, extraPtr); err != nil {
			return nil, err
		}
	}
	hidden, _ := s.Values[hiddenProperties].(*Object)
	if hidden == nil {
		hidden = &Object{}
	}
	if len(hidden.Keys) > 0 {
		simple = false
	}
	var members []member
	listed := map[string]bool{}
	props := &Object{}
	if v, ok := s.Get("properties"); ok {
		if props, ok = v.(*Object); !ok {
			return nil, errAt(ptr+"/properties", "must be an object of schemas")
		}
	}
	// The members in their order: propertyOrder's names first (a hidden one there is written
	// in its place, as a listed one, though it evaluates nothing), then the other listed ones.
	var order []string
	if list, ok := s.Values[propertyOrder].([]any); ok {
		for _, x := range list {
			k, _ := x.(string)
			if _, h := hidden.Get(k); (props.Values[k] != nil || h) && !slices.Contains(order, k) {
				order = append(order, k)
			}
		}
	}
	for _, k := range props.Keys {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	for _, k := range order {
		listed[k] = true
		schemas, ptrs := matching(k)
		if v, ok := props.Get(k); ok {
			schemas = append([]any{v}, schemas...)
			ptrs = append([]string{ptr + "/properties/" + escapePointer(k)}, ptrs...)
		} else if len(schemas) == 0 {
			schemas, ptrs = []any{extraNode}, []string{extraPtr}
		}
		if h, ok := hidden.Get(k); ok {
			schemas, ptrs = append(schemas, h), append(ptrs, ptr)
		}
		var e grammar.Expr
		if allowed(k) {
			if e, err = c.valueOf(schemas, ptrs); err != nil {
				return nil, err
			}
		}
		req := slices.Contains(required, k)
		if e == nil {
			if req {
				return nil, nil // a required property no value satisfies
			}
			continue // the property may not appear
		}
		members = append(members, member{key: k, value: e, required: req})
	}
	// The properties not listed that are required or hidden: written among the others (a
	// hidden one no value satisfies may not appear: it is left out of the other names).
	var unlisted []member
	for _, k := range append(slices.Clone(required), hidden.Keys...) {
		if listed[k] {
			continue
		}
		listed[k] = true
		req := slices.Contains(required, k)
		value := extra
		if !simple {
			value = nil
			if allowed(k) {
				schemas, ptrs := matching(k)
				if len(schemas) == 0 {
					schemas, ptrs = []any{extraNode}, []string{extraPtr}
				}
				if h, ok := hidden.Get(k); ok {
					schemas, ptrs = append(schemas, h), append(ptrs, ptr)
				}
				if value, err = c.valueOf(schemas, ptrs); err != nil {
					return nil, err
				}
			}
		}
		switch {
		case value == nil && req:
			return nil, nil // required, not listed, and not allowed
		case value != nil:
			unlisted = append(unlisted, member{key: k, value: value, required: req})
		}
	}
	if len(hidden.Keys) > 0 && len(unlisted) > MaxUnlisted {
		return nil, errAt(ptr, "more than %d properties that properties does not list, required or constrained by a negation, are not supported", MaxUnlisted)
	}
	// Other properties: any name but the listed ones.
	var others []string
	for k := range listed {
		others = append(others, k)
	}
	slices.Sort(others)
	ws := c.baseRule("ws")
	var extraKV grammar.Expr
	switch {
	case !simple:
		if extraKV, err = c.otherMembers(others, names, allNames, patterns, extraNode, extraPtr); err != nil {
			return nil, err
		}
	case extra != nil:
		extraKV = seq(c.otherKey(others), ws, lit(":"), ws, extra)
	}
	nReq := 0
	for _, m := range append(slices.Clone(members), unlisted...) {
		if m.required {
			nReq++
		}
	}
	minP, err := count(s, "minProperties", ptr)
	if err != nil {
		return nil, err
	}
	maxP, err := count(s, "maxProperties", ptr)
	if err != nil {
		return nil, err
	}
	if maxP >= 0 && maxP < nReq {
		return nil, nil
	}
	// The counts decide nothing when the required properties reach minProperties and no
	// more properties than maxProperties can be written.
	counted := minP > nReq || maxP >= 0 && (extraKV != nil || maxP < len(members)+len(unlisted))
	if counted || len(hidden.Keys) > 0 || len(unlisted) > 0 && len(unlisted) <= MaxUnlisted {
		if !counted {
			minP, maxP = 0, -1
		}
		body, err := c.members(members, unlisted, extraKV, minP, maxP, ptr)
		if body == nil || err != nil {
			return nil, err
		}
		return seq(lit("{"), ws, body, lit("}")), nil
	}
	members = append(members, unlisted...)
	comma := seq(ws, lit(","), ws)
	kv := func(m member) grammar.Expr { return seq(lit(quote(m.key)), ws, lit(":"), ws, m.value) }
	// rest(i): members from i on, each after a comma, then other properties.
	rests := make([]grammar.Expr, len(members)+1)
	if extraKV != nil {
		rests[len(members)] = c.addRule("props", rep(seq(comma, extraKV), 0, -1))
	} else {
		rests[len(members)] = seq()
	}
	for i := len(members) - 1; i >= 0; i-- {
		with := seq(comma, kv(members[i]), rests[i+1])
		if members[i].required {
			rests[i] = c.addRule("props", with)
		} else {
			rests[i] = c.addRule("props", alt(with, rests[i+1]))
		}
	}
	// first(i): the members from i on, the first present one without a comma; nil when
	// nothing may be written.
	firsts := make([]grammar.Expr, len(members)+1)
	if extraKV != nil {
		firsts[len(members)] = seq(extraKV, rests[len(members)])
	}
	for i := len(members) - 1; i >= 0; i-- {
		with := seq(kv(members[i]), rests[i+1])
		if members[i].required {
			firsts[i] = c.addRule("props", with)
		} else {
			firsts[i] = c.addRule("props", alt(with, firsts[i+1]))
		}
	}
	var body grammar.Expr = seq()
	if firsts[0] != nil {
		body = seq(firsts[0], ws)
		if nReq == 0 {
			body = rep(body, 0, 1)
		}
	}
	return seq(lit("{"), ws, body, lit("}")), nil
}

// refRule returns a reference to the rule of the schema at tptr, compiling it once (a
// recursive schema refers to its own rule).
func (c *compiler) refRule(target any, tptr string) (grammar.Expr, error) {
	key := tptr
	if c.res.hasDyn {
		// Where $dynamicRef resolves depends on the dynamic scope: one rule per scope.
		key += " " + strings.Join(c.scope, " ")
	}
	if name, ok := c.refs[key]; ok {
		if name == "" { // the target accepts nothing: so does every reference to it
			return nil, nil
		}
		return ref(name), nil
	}
	c.n++
	name := fmt.Sprintf("ref-%d", c.n)
	c.refs[key] = name
	idx := len(c.rules)
	c.rules = append(c.rules, grammar.Rule{Name: name})
	body, err := c.schema(target, tptr)
	if err != nil {
		return nil, err
	}
	if body == nil {
		c.refs[key] = ""
		c.rules[idx].Body = &grammar.Class{} // nothing; references to it are dropped
		return nil, nil
	}
	c.rules[idx].Body = body
	return ref(name), nil
}

// resolve follows the $ref (or $dynamicRef, kw) of s within the document.
func (c *compiler) resolve(s *Object, ptr, kw string) (any, string, error) {
	v, ok := s.Values[kw].(string)
	if !ok {
		return nil, "", errAt(ptr+"/"+kw, "must be a string")
	}
	var node any
	var tptr string
	var err error
	if kw == "$dynamicRef" {
		node, tptr, err = c.res.dynamicResolve(s, v, c.scope)
	} else {
		node, tptr, err = c.res.resolve(s, v)
	}
	if err != nil {
		return nil, "", errAt(ptr+"/"+kw, "%v", err)
	}
	return node, tptr, nil
}

// merge combines schemas that must all hold into one, when their keywords do not overlap
// (required lists are united, properties with different names joined, equal values kept); a
// schema that is a bare $ref is followed. Anything else is refused.
func (c *compiler) merge(parts []any, ptr string) (any, error) {
	out := &Object{Values: map[string]any{}}
	var objParts, arrParts, hidParts []*Object // parts with keywords on properties, on items, on hidden items
	var conds []any                            // the parts' contains conditions
	// Beside unevaluated* (in part 0, the schema itself), an if without then or else still
	// evaluates what it matches.
	annotationsMatter := false
	if o, ok := parts[0].(*Object); ok && hasUnevaluated(o) {
		annotationsMatter = true
	}
	// The schema resources the parts enter, for the dynamic scope of the merged schema.
	var entered []string
	enteredBy := -1 // the part that entered them: parts from different resources are refused
	var enterErr error
	enter := func(i int, p any) {
		o, ok := p.(*Object)
		if !ok || !c.res.hasDyn {
			return
		}
		bases := c.entered[o]
		if base, ok := c.res.baseOf[o]; ok {
			bases = append([]string{base.String()}, bases...)
		}
		for _, b := range bases {
			if !slices.Contains(c.scope, b) && !slices.Contains(entered, b) {
				if enteredBy >= 0 && enteredBy != i {
					// Each part has its own dynamic scope, which one merged schema cannot keep.
					enterErr = errAt(ptr, "$dynamicRef in a document where schemas from different resources (%s) are merged is not supported", b)
				}
				enteredBy = i
				entered = append(entered, b)
			}
		}
	}
	defer func() {
		if o, ok := out.Values, len(entered) > 0; ok && o != nil {
			c.entered[out] = entered
		}
	}()
	for i, p := range parts {
		for hops := 0; ; hops++ {
			o, ok := p.(*Object)
			if !ok {
				break
			}
			enter(i, o)
			if enterErr != nil {
				return nil, enterErr
			}
			kw := "$ref"
			if _, ok := o.Get("$dynamicRef"); ok {
				kw = "$dynamicRef"
			}
			_, ok = o.Get(kw)
			if !ok || !onlyAnnotations(without(o, kw)) {
				break
			}
			if hops > 20 {
				return nil, errAt(ptr, "allOf through more than 20 $refs")
			}
			scope := c.scope
			c.scope = append(slices.Clone(scope), entered...)
			t, _, err := c.resolve(o, ptr, kw)
			c.scope = scope
			if err != nil {
				return nil, err
			}
			p = t
		}
		if v, ok := p.(*Object); ok && i > 0 {
			// unevaluated* of a part sees only what the part evaluates (that of the schema
			// itself, part 0, sees every part): the part's own rewrite, first.
			local, err := c.localUnevaluated(v, ptr)
			if err != nil {
				return nil, err
			}
			p = local
		}
		switch v := p.(type) {
		case bool:
			if !v {
				return false, nil
			}
			continue
		case *Object:
			if _, ok := v.Get("$ref"); ok {
				return nil, errAt(ptr, "allOf (or $ref beside other keywords) with a $ref that has keywords of its own is not supported")
			}
			objHas, arrHas, hidHas := false, false, false
			for _, k := range v.Keys {
				if annotations[k] || inert(v, k) && !(k == "if" && annotationsMatter) {
					continue
				}
				switch k {
				case "properties", "patternProperties", "additionalProperties":
					objHas = true
					continue
				case "prefixItems", "items":
					arrHas = true
					continue
				case hiddenPrefixItems, hiddenItems:
					hidHas = true
					continue
				case "contains", "minContains", "maxContains", moreContains:
					continue // below: each part's contains is a condition of its own
				}
				val := v.Values[k]
				old, dup := out.Values[k]
				if !dup {
					out.Keys = append(out.Keys, k)
					out.Values[k] = val
					continue
				}
				if k == "const" || k == "enum" {
					// The values both allow; none: nothing is valid.
					both := sameValues(old, val, k)
					if len(both) == 0 {
						return false, nil
					}
					out.Values[k] = both
					if k == "const" {
						out.Values[k] = both[0]
					}
					continue
				}
				merged, ok := mergeKeyword(k, old, val)
				if !ok {
					return nil, errAt(ptr, "allOf with keyword %q in two parts (part %d) is not supported", k, i)
				}
				out.Values[k] = merged
			}
			if cv, ok := v.Get("contains"); ok {
				cond := schemaOf("contains", cv)
				for _, k := range []string{"minContains", "maxContains"} {
					if x, ok := v.Get(k); ok {
						cond.Keys = append(cond.Keys, k)
						cond.Values[k] = x
					}
				}
				conds = append(conds, cond)
			}
			if more, ok := v.Values[moreContains].([]any); ok {
				conds = append(conds, more...)
			}
			if objHas {
				objParts = append(objParts, v)
			}
			if arrHas {
				arrParts = append(arrParts, v)
			}
			if hidHas {
				hidParts = append(hidParts, v)
			}
		default:
			return nil, errAt(ptr, "a schema must be an object or a boolean")
		}
	}
	if err := mergeProperties(out, objParts, ptr); err != nil {
		return nil, err
	}
	mergeItems(out, arrParts)
	mergeItemsAs(out, hidParts, hiddenPrefixItems, hiddenItems)
	// The contains conditions: the first that evaluates as contains, the others, distinct, in
	// moreContains.
	var distinct []any
	first := -1
	for _, cond := range conds {
		if !slices.ContainsFunc(distinct, func(x any) bool { return reflect.DeepEqual(x, cond) }) {
			if _, hidden := cond.(*Object).Get(hiddenCond); !hidden && first < 0 {
				first = len(distinct)
			}
			distinct = append(distinct, cond)
		}
	}
	var more []any
	for i, cond := range distinct {
		if i != first {
			more = append(more, cond)
			continue
		}
		for _, k := range cond.(*Object).Keys {
			out.Keys = append(out.Keys, k)
			out.Values[k] = cond.(*Object).Values[k]
		}
	}
	if len(more) > 0 {
		out.Keys = append(out.Keys, moreContains)
		out.Values[moreContains] = more
	}
	return out, nil
}

// localUnevaluated rewrites the unevaluated* of a part of allOf (after merging its own allOf)
// as additionalProperties and items, as unevaluated does; a part with other applicators
// beside unevaluated* is refused.
func (c *compiler) localUnevaluated(v *Object, ptr string) (any, error) {
	_, up := v.Get("unevaluatedProperties")
	_, ui := v.Get("unevaluatedItems")
	if !up && !ui {
		return v, nil
	}
	var node any = v
	if list, ok := v.Values["allOf"].([]any); ok {
		m, err := c.merge(append([]any{without(v, "allOf")}, list...), ptr)
		if err != nil {
			return nil, err
		}
		node = m
	}
	o, ok := node.(*Object)
	if !ok {
		return node, nil
	}
	for _, k := range []string{"$ref", "dependentSchemas", "allOf"} {
		if _, ok := o.Get(k); ok {
			return nil, errAt(ptr, "unevaluatedProperties or unevaluatedItems beside %s inside a part of allOf (or a $ref target beside other keywords) is not supported", k)
		}
	}
	out, _, err := unevaluated(o, ptr)
	return out, err
}

// allOfSchemas is the schema that holds when all of list hold.
func allOfSchemas(list []any) any {
	switch len(list) {
	case 0:
		return true
	case 1:
		return list[0]
	}
	return schemaOf("allOf", list)
}

// mergeProperties writes into out the properties, patternProperties and additionalProperties
// of parts that must all hold. additionalProperties sees only its own part's properties: a
// name another part lists takes, from each part, that part's schema for it or its
// additionalProperties; the others take every part's additionalProperties.
// patternProperties in two parts, or beside another part's additionalProperties, are refused.
func mergeProperties(out *Object, parts []*Object, ptr string) error {
	set := out.add
	if len(parts) == 1 {
		for _, k := range []string{"properties", "patternProperties", "additionalProperties"} {
			if v, ok := parts[0].Get(k); ok && !inert(parts[0], k) {
				set(k, v)
			}
		}
		return nil
	}
	var patternsPart *Object
	extras := 0
	for _, p := range parts {
		if _, ok := p.Get("patternProperties"); ok {
			if patternsPart != nil {
				return errAt(ptr, "allOf with keyword \"patternProperties\" in two parts is not supported")
			}
			patternsPart = p
		}
		// (additionalProperties true constrains no name, whatever patterns another part has)
		if x, ok := p.Get("additionalProperties"); ok && (x != true || p == patternsPart) {
			extras++
		}
	}
	if patternsPart != nil {
		if _, own := patternsPart.Get("additionalProperties"); extras > 1 || extras == 1 && !own {
			return errAt(ptr, "additionalProperties beside patternProperties of another part of allOf is not supported")
		}
		set("patternProperties", patternsPart.Values["patternProperties"])
	}
	var names []string
	seen := map[string]bool{}
	for _, p := range parts {
		if props, ok := p.Values["properties"].(*Object); ok {
			for _, k := range props.Keys {
				if !seen[k] {
					seen[k] = true
					names = append(names, k)
				}
			}
		}
	}
	if len(names) > 0 {
		merged := &Object{Values: map[string]any{}}
		for _, k := range names {
			var list []any
			for _, p := range parts {
				props, _ := p.Values["properties"].(*Object)
				if props != nil && props.Values[k] != nil {
					list = append(list, props.Values[k])
				} else if extra, ok := p.Get("additionalProperties"); ok && p != patternsPart {
					list = append(list, extra)
				} else if ok {
					// The part with patterns: a name they match takes their schemas instead.
					pats, _ := p.Values["patternProperties"].(*Object)
					matched := false
					for _, pat := range pats.Keys {
						if d, err := patternDFA(pat, ptr); err == nil && d.Match(k) {
							matched = true
						}
					}
					if !matched {
						list = append(list, extra)
					}
				}
			}
			merged.Keys = append(merged.Keys, k)
			merged.Values[k] = allOfSchemas(list)
		}
		set("properties", merged)
	}
	out.addAllOf(parts, "additionalProperties")
	return nil
}

// mergeItems writes into out the prefixItems and items of parts that must all hold: the item
// at each position takes, from each part, that part's prefixItems schema there or its items.
func mergeItems(out *Object, parts []*Object) {
	mergeItemsAs(out, parts, "prefixItems", "items")
}

// mergeItemsAs is mergeItems for the pair of keywords prefixKey and itemsKey (the hidden ones
// of a rewritten unevaluatedItems, say): position i of the merged list is the allOf of each
// part's schema there, its prefix list's, or past its end its items'.
func mergeItemsAs(out *Object, parts []*Object, prefixKey, itemsKey string) {
	set := out.add
	if len(parts) == 1 {
		for _, k := range []string{prefixKey, itemsKey} {
			if v, ok := parts[0].Get(k); ok {
				set(k, v)
			}
		}
		return
	}
	n := 0
	for _, p := range parts {
		if list, ok := p.Values[prefixKey].([]any); ok {
			n = max(n, len(list))
		}
	}
	if n > 0 {
		prefix := make([]any, n)
		for i := range n {
			var list []any
			for _, p := range parts {
				pl, _ := p.Values[prefixKey].([]any)
				if i < len(pl) {
					list = append(list, pl[i])
				} else if items, ok := p.Get(itemsKey); ok {
					list = append(list, items)
				}
			}
			prefix[i] = allOfSchemas(list)
		}
		set(prefixKey, prefix)
	}
	out.addAllOf(parts, itemsKey)
}

// add appends key k with value v.
func (o *Object) add(k string, v any) {
	o.Keys = append(o.Keys, k)
	o.Values[k] = v
}

// addAllOf sets key k to the allOf of the values the parts give it, if any part gives one.
func (o *Object) addAllOf(parts []*Object, k string) {
	var list []any
	for _, p := range parts {
		if v, ok := p.Get(k); ok {
			list = append(list, v)
		}
	}
	if len(list) > 0 {
		o.add(k, allOfSchemas(list))
	}
}

// sameValues are the values of a and b (const values or enum lists, after kw) that are equal
// JSON values.
func sameValues(a, b any, kw string) []any {
	la, lb := []any{a}, []any{b}
	if kw == "enum" {
		la, _ = a.([]any)
		lb, _ = b.([]any)
	}
	var out []any
	for _, x := range la {
		bx, err := Marshal(x)
		if err != nil {
			continue
		}
		for _, y := range lb {
			if by, err := Marshal(y); err == nil && bytes.Equal(bx, by) {
				out = append(out, x)
				break
			}
		}
	}
	return out
}

// inert reports whether keyword k of s has no effect alone, and would take one from another
// part of allOf if merged: then and else without if, if without then or else (unless
// unevaluated* sees what it evaluates), minContains and maxContains without contains.
func inert(s *Object, k string) bool {
	has := func(k string) bool { _, ok := s.Get(k); return ok }
	switch k {
	case "then", "else":
		return !has("if")
	case "if":
		return !has("then") && !has("else")
	case "minContains", "maxContains":
		return !has("contains")
	}
	return false
}

func mergeKeyword(k string, a, b any) (any, bool) {
	if reflect.DeepEqual(a, b) {
		return a, true
	}
	switch k {
	case "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
		"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains":
		// Both bounds: the tighter.
		na, ok1 := a.(json.Number)
		nb, ok2 := b.(json.Number)
		ra, ok3 := new(big.Rat).SetString(string(na))
		rb, ok4 := new(big.Rat).SetString(string(nb))
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, false
		}
		lower := strings.HasPrefix(k, "min") || k == "exclusiveMinimum"
		if ra.Cmp(rb) < 0 == lower {
			return nb, true
		}
		return na, true
	case "uniqueItems":
		return a == true || b == true, true
	case "not":
		// Neither: not either.
		return schemaOf("anyOf", []any{a, b}), true
	case propertyOrder, "required":
		// Both lists, each name once, in first appearance.
		la, ok1 := a.([]any)
		lb, ok2 := b.([]any)
		if !ok1 || !ok2 {
			return nil, false
		}
		out := slices.Clone(la)
		for _, x := range lb {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
		return out, true
	case hiddenProperties:
		pa, ok1 := a.(*Object)
		pb, ok2 := b.(*Object)
		if !ok1 || !ok2 {
			return nil, false
		}
		out := &Object{Keys: slices.Clone(pa.Keys), Values: maps.Clone(pa.Values)}
		for _, k := range pb.Keys {
			if old, dup := out.Values[k]; dup {
				out.Values[k] = allOfSchemas([]any{old, pb.Values[k]})
				continue
			}
			out.Keys = append(out.Keys, k)
			out.Values[k] = pb.Values[k]
		}
		return out, true
	case "multipleOf":
		// The multiples of both: of their least common multiple.
		ma, err1 := multipleOf(a, "")
		mb, err2 := multipleOf(b, "")
		if err1 != nil || err2 != nil {
			return nil, false
		}
		num := new(big.Int).GCD(nil, nil, ma.Num(), mb.Num())
		num.Quo(new(big.Int).Mul(ma.Num(), mb.Num()), num)
		den := new(big.Int).GCD(nil, nil, ma.Denom(), mb.Denom())
		l := new(big.Rat).SetFrac(num, den)
		_, e, ok := decimalScale(l)
		if !ok {
			return nil, false
		}
		return json.Number(l.FloatString(e)), true
	case "type":
		// The types both allow.
		ta, err1 := typesOf(&Object{Keys: []string{"type"}, Values: map[string]any{"type": a}}, "")
		tb, err2 := typesOf(&Object{Keys: []string{"type"}, Values: map[string]any{"type": b}}, "")
		if err1 != nil || err2 != nil {
			return nil, false
		}
		out := []any{}
		for _, t := range ta {
			switch {
			case slices.Contains(tb, t):
				out = append(out, t)
			case t == "integer" && slices.Contains(tb, "number"), t == "number" && slices.Contains(tb, "integer"):
				out = append(out, "integer")
			}
		}
		return out, true
	}
	return nil, false
}

func without(s *Object, key string) *Object {
	out := &Object{Values: map[string]any{}}
	for _, k := range s.Keys {
		if k != key {
			out.Keys = append(out.Keys, k)
			out.Values[k] = s.Values[k]
		}
	}
	return out
}

func onlyAnnotations(s *Object) bool {
	for _, k := range s.Keys {
		if !annotations[k] {
			return false
		}
	}
	return true
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// pointerTokens returns the reference tokens of a JSON pointer ("" for the whole document,
// else "/" and the tokens, each escaped as escapePointer writes it), unescaped; false for a
// pointer that does not start with "/".
func pointerTokens(ptr string) ([]string, bool) {
	if ptr == "" {
		return nil, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	tokens := strings.Split(ptr[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, true
}
