package jsonschema

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// defaultBase is the base URI of a schema without a root $id.
const defaultBase = "loom:///schema.json"

// resources indexes the schema resources of a document: the subschemas with an $id (by their
// absolute URI), the $anchor and $dynamicAnchor names (by URI#name), and the base URI in
// force at each schema object, so that $ref resolves as draft 2020-12 says within the
// document.
type resources struct {
	byURI   map[string]resource
	dynamic map[string]resource // the $dynamicAnchors, by URI#name
	baseOf  map[*Object]*url.URL
	root    *url.URL
	nested  bool // some subschema has an $id
	hasDyn  bool // some schema has a $dynamicRef
}

type resource struct {
	node any
	ptr  string
}

// schemaMaps are keywords whose value maps names to schemas; schemaKeywords hold a schema or
// a list of schemas. Other keywords' values (const, enum, examples, unknown keywords) are not
// schemas, so an $id inside them identifies nothing.
var (
	schemaMaps     = set("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
	schemaKeywords = set("items", "prefixItems", "additionalProperties", "contains", "not", "if", "then", "else",
		"allOf", "anyOf", "oneOf", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contentSchema")
)

func newResources(root any) *resources {
	r := &resources{byURI: map[string]resource{}, dynamic: map[string]resource{}, baseOf: map[*Object]*url.URL{}}
	r.root, _ = url.Parse(defaultBase)
	if o, ok := root.(*Object); ok {
		if id, ok := o.Values["$id"].(string); ok {
			if u, err := r.root.Parse(id); err == nil {
				u.Fragment, u.RawFragment = "", ""
				r.root = u
			}
		}
	}
	r.byURI[r.root.String()] = resource{node: root, ptr: ""}
	r.walk(root, r.root, "")
	return r
}

func (r *resources) walk(node any, base *url.URL, ptr string) {
	switch v := node.(type) {
	case []any:
		for i, x := range v {
			r.walk(x, base, ptr+"/"+strconv.Itoa(i))
		}
	case *Object:
		if id, ok := v.Values["$id"].(string); ok && ptr != "" {
			if u, err := base.Parse(id); err == nil {
				u.Fragment, u.RawFragment = "", ""
				base = u
				r.nested = true
				if _, dup := r.byURI[u.String()]; !dup {
					r.byURI[u.String()] = resource{node: v, ptr: ptr}
				}
			}
		}
		r.baseOf[v] = base
		for _, k := range []string{"$anchor", "$dynamicAnchor"} {
			if a, ok := v.Values[k].(string); ok {
				key := base.String() + "#" + a
				if _, dup := r.byURI[key]; !dup {
					r.byURI[key] = resource{node: v, ptr: ptr}
				}
				if _, dup := r.dynamic[key]; !dup && k == "$dynamicAnchor" {
					r.dynamic[key] = resource{node: v, ptr: ptr}
				}
			}
		}
		if _, ok := v.Values["$dynamicRef"]; ok {
			r.hasDyn = true
		}
		for _, k := range v.Keys {
			kptr := ptr + "/" + escapePointer(k)
			switch {
			case schemaMaps[k]:
				if m, ok := v.Values[k].(*Object); ok {
					for _, name := range m.Keys {
						r.walk(m.Values[name], base, kptr+"/"+escapePointer(name))
					}
				}
			case schemaKeywords[k]:
				r.walk(v.Values[k], base, kptr)
			}
		}
	}
}

// dynamicResolve finds the target of a $dynamicRef of from, given the dynamic scope (the
// base URIs of the schema resources entered, outermost first): where ref names an anchor and
// its initial target (as $ref resolves it) has a $dynamicAnchor of that name, the outermost
// resource in scope with a $dynamicAnchor of that name; otherwise the initial target.
func (r *resources) dynamicResolve(from *Object, ref string, scope []string) (any, string, error) {
	node, ptr, err := r.resolve(from, ref)
	if err != nil {
		return nil, "", err
	}
	o, ok := node.(*Object)
	if !ok {
		return node, ptr, nil
	}
	name, ok := o.Values["$dynamicAnchor"].(string)
	if !ok {
		return node, ptr, nil
	}
	if u, err := url.Parse(ref); err != nil || u.Fragment != name {
		return node, ptr, nil
	}
	for _, base := range scope {
		if d, ok := r.dynamic[base+"#"+name]; ok {
			return d.node, d.ptr, nil
		}
	}
	return node, ptr, nil
}

// resolve finds the target of the $ref of from: its node and its JSON pointer in the
// document.
func (r *resources) resolve(from *Object, ref string) (any, string, error) {
	base, ok := r.baseOf[from]
	if !ok {
		if r.nested {
			return nil, "", fmt.Errorf("%q: the base URI of this schema is not known (a schema built from parts of others, in a document with nested $id)", ref)
		}
		base = r.root
	}
	u, err := base.Parse(ref)
	if err != nil {
		return nil, "", fmt.Errorf("%q: %v", ref, err)
	}
	frag := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	doc := u.String()
	res, ok := r.byURI[doc]
	if !ok {
		return nil, "", fmt.Errorf("%q refers to another document (%s): only references within the schema are supported", ref, doc)
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		a, ok := r.byURI[doc+"#"+frag]
		if !ok {
			return nil, "", fmt.Errorf("%q: no $anchor %q in the schema", ref, frag)
		}
		return a.node, a.ptr, nil
	}
	node := res.node
	tokens, _ := pointerTokens(frag) // frag is "" or starts with "/" (an anchor otherwise, above)
	for _, tok := range tokens {
		switch n := node.(type) {
		case *Object:
			next, ok := n.Get(tok)
			if !ok {
				return nil, "", fmt.Errorf("%q: no %q in the schema", ref, tok)
			}
			node = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil, "", fmt.Errorf("%q: no item %q", ref, tok)
			}
			node = n[i]
		default:
			return nil, "", fmt.Errorf("%q: cannot step into a %s", ref, jsonType(node))
		}
	}
	return node, res.ptr + frag, nil
}

// listedNames are the property names a schema lists, in the order its compiled object writes
// them: its properties, those of its $ref's target, of its allOf parts, then of if, then and
// else (as the merges write them). Order and the branches of if/then/else both use it.
func (r *resources) listedNames(node any, depth int) []string {
	o, ok := node.(*Object)
	if !ok || depth > 20 {
		return nil
	}
	var out []string
	add := func(names []string) {
		for _, k := range names {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	if p, ok := o.Values["properties"].(*Object); ok {
		add(p.Keys)
	}
	if ref, ok := o.Values["$ref"].(string); ok {
		if t, _, err := r.resolve(o, ref); err == nil {
			add(r.listedNames(t, depth+1))
		}
	}
	if parts, ok := o.Values["allOf"].([]any); ok {
		for _, p := range parts {
			add(r.listedNames(p, depth+1))
		}
	}
	if _, ok := o.Get("if"); ok {
		for _, k := range []string{"if", "then", "else"} {
			add(r.listedNames(o.Values[k], depth+1))
		}
	}
	return out
}
