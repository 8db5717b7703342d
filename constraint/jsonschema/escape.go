package jsonschema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loomlm/loom/constraint/grammar"
)

// escapeJSON turns the expression of a set of strings (a regular expression's grammar) into
// the expression of those strings written inside a JSON string literal: '"', '\' and control
// characters appear escaped, as encoding/json writes them (\n, \r, \t, \uXXXX for the other
// controls, \u2028 and \u2029).
func escapeJSON(e grammar.Expr) grammar.Expr {
	switch e := e.(type) {
	case *grammar.Alt:
		out := &grammar.Alt{}
		for _, a := range e.Alts {
			out.Alts = append(out.Alts, escapeJSON(a))
		}
		return out
	case *grammar.Seq:
		out := &grammar.Seq{}
		for _, a := range e.Items {
			out.Items = append(out.Items, escapeJSON(a))
		}
		return out
	case *grammar.Repeat:
		return &grammar.Repeat{Expr: escapeJSON(e.Expr), Min: e.Min, Max: e.Max}
	case *grammar.Literal:
		var b strings.Builder
		for _, r := range e.Text {
			b.WriteString(escapedRune(r))
		}
		return lit(b.String())
	case *grammar.Class:
		return escapeClass(e)
	}
	return e
}

// special are the code points JSON writes escaped.
var special = []grammar.RuneRange{{Lo: 0, Hi: 0x1f}, {Lo: '"', Hi: '"'}, {Lo: '\\', Hi: '\\'}, {Lo: 0x2028, Hi: 0x2029}}

func escapedRune(r rune) string {
	switch r {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x20 || r == 0x2028 || r == 0x2029 {
		return fmt.Sprintf(`\u%04x`, r)
	}
	return string(r)
}

func contains(c *grammar.Class, r rune) bool {
	in := false
	for _, rg := range c.Ranges {
		if r >= rg.Lo && r <= rg.Hi {
			in = true
			break
		}
	}
	return in != c.Negated
}

// escapeClass splits a class into its plain part (without the special code points) and the
// escaped forms of the special code points it contains.
func escapeClass(c *grammar.Class) grammar.Expr {
	var plain *grammar.Class
	if c.Negated {
		plain = &grammar.Class{Negated: true, Ranges: append(append([]grammar.RuneRange(nil), c.Ranges...), special...)}
	} else {
		plain = &grammar.Class{}
		for _, rg := range c.Ranges {
			plain.Ranges = append(plain.Ranges, subtract(rg, special)...)
		}
	}
	var alts []grammar.Expr
	if c.Negated || len(plain.Ranges) > 0 {
		alts = append(alts, plain)
	}
	for _, sp := range special {
		for r := sp.Lo; r <= sp.Hi; r++ {
			if contains(c, r) {
				alts = append(alts, lit(escapedRune(r)))
			}
		}
	}
	if len(alts) == 0 {
		return &grammar.Class{} // matches nothing
	}
	return alt(alts...)
}

// subtract removes the ranges cut from rg.
func subtract(rg grammar.RuneRange, cut []grammar.RuneRange) []grammar.RuneRange {
	out := []grammar.RuneRange{rg}
	for _, c := range cut {
		var next []grammar.RuneRange
		for _, r := range out {
			if c.Hi < r.Lo || c.Lo > r.Hi {
				next = append(next, r)
				continue
			}
			if r.Lo < c.Lo {
				next = append(next, grammar.RuneRange{Lo: r.Lo, Hi: c.Lo - 1})
			}
			if r.Hi > c.Hi {
				next = append(next, grammar.RuneRange{Lo: c.Hi + 1, Hi: r.Hi})
			}
		}
		out = next
	}
	return out
}

// keyTrie is a node of the trie of the listed property names, by their written units (a
// code point or its escape, as quote writes it).
type keyTrie struct {
	end      bool
	children map[string]*keyTrie
	order    []string
}

func (t *keyTrie) add(units []string) {
	n := t
	for _, u := range units {
		if n.children == nil {
			n.children = map[string]*keyTrie{}
		}
		next, ok := n.children[u]
		if !ok {
			next = &keyTrie{}
			n.children[u] = next
			n.order = append(n.order, u)
		}
		n = next
	}
	n.end = true
}

// units splits a key into the units quote writes.
func units(key string) []string {
	var out []string
	for _, r := range key {
		out = append(out, escapedRune(r))
	}
	return out
}

// otherKey returns the expression of a JSON string that is none of the keys: the property
// names an object may add beside its listed ones.
func (c *compiler) otherKey(keys []string) grammar.Expr {
	if len(keys) == 0 {
		return c.baseRule("string")
	}
	root := &keyTrie{}
	for _, k := range keys {
		root.add(units(k))
	}
	return seq(lit(`"`), c.notIn(root), lit(`"`))
}

// notIn is the expression of the contents that are not a word of t.
func (c *compiler) notIn(t *keyTrie) grammar.Expr {
	var alts []grammar.Expr
	if !t.end {
		alts = append(alts, seq())
	}
	var plain []rune
	var escapes []string
	for _, u := range t.order {
		alts = append(alts, seq(lit(u), c.notIn(t.children[u])))
		if strings.HasPrefix(u, `\`) {
			escapes = append(escapes, u)
		} else {
			r := []rune(u)[0]
			plain = append(plain, r, r)
		}
	}
	// A unit that leaves the trie, then anything.
	other := &grammar.Class{Negated: true, Ranges: append([]grammar.RuneRange(nil), special...)}
	for i := 0; i+1 < len(plain); i += 2 {
		other.Ranges = append(other.Ranges, grammar.RuneRange{Lo: plain[i], Hi: plain[i+1]})
	}
	var esc []grammar.Expr
	for _, e := range []string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`} {
		if !slices.Contains(escapes, e) {
			esc = append(esc, lit(e))
		}
	}
	esc = append(esc, seq(lit(`\u`), rep(class(false, '0', '9', 'a', 'f', 'A', 'F'), 4, 4)))
	leave := alt(append([]grammar.Expr{other}, esc...)...)
	if len(t.order) > 0 || t.end {
		alts = append(alts, seq(leave, rep(c.baseRule("char"), 0, -1)))
	}
	return c.addRule("other-key", alt(alts...))
}
