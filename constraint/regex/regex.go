// Package regex compiles a regular expression to a grammar (package grammar), so a regex
// constraint is recognised by the same Earley parser and token-trie walk as a GBNF grammar.
//
// The syntax is Go's regexp syntax (RE2, parsed by regexp/syntax with Perl flags): literals,
// escapes, character classes ([a-z], [^…], \d \w \s and their negations, [[:alpha:]],
// \p{Greek}), ., alternation, groups (capturing or not), *, +, ?, {m}, {m,}, {m,n} (non-greedy
// forms match the same language), and the flags i and s ((?i) case folding, (?s) letting .
// match a newline). The whole output must match: ^ and \A at the start and $ and \z at the end
// are accepted and change nothing. Anything else that asserts a position instead of matching
// characters — ^ or $ elsewhere, multi-line mode, \b, \B — is refused with an error, as are
// counts above grammar.MaxRepeat.
//
// For what a grammar cannot do — intersect two languages, or take a complement — the package
// also builds deterministic automata over code points (DFAOf, Literals, Lengths), their
// products (Intersect, Minus, Complement, Product) and the grammar of an automaton (one rule
// per state), bounded at MaxStates states.
package regex

import (
	"fmt"
	"regexp/syntax"
	"unicode"

	"github.com/loomlm/loom/constraint/grammar"
)

// Compile parses re and returns a CFG whose sentences are exactly the strings re matches in
// full.
func Compile(re string) (*grammar.CFG, error) {
	g, err := Parse(re)
	if err != nil {
		return nil, err
	}
	cfg, err := grammar.Compile(g, "root")
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", re, err)
	}
	return cfg, nil
}

// Parse converts re to a one-rule grammar named root.
func Parse(re string) (*grammar.Grammar, error) {
	tree, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", re, err)
	}
	c := &converter{re: re}
	body, err := c.expr(tree, true, true)
	if err != nil {
		return nil, err
	}
	return &grammar.Grammar{Rules: []grammar.Rule{{Name: "root", Body: body, Pos: grammar.Pos{Line: 1, Col: 1}}}}, nil
}

type converter struct{ re string }

func (c *converter) errf(format string, args ...any) error {
	return fmt.Errorf("regex %q: "+format, append([]any{c.re}, args...)...)
}

// expr converts r; atStart and atEnd tell whether r can only match at the start (end) of the
// whole expression, where anchors are allowed.
func (c *converter) expr(r *syntax.Regexp, atStart, atEnd bool) (grammar.Expr, error) {
	switch r.Op {
	case syntax.OpNoMatch:
		return &grammar.Class{}, nil
	case syntax.OpEmptyMatch:
		return &grammar.Seq{}, nil
	case syntax.OpLiteral:
		if r.Flags&syntax.FoldCase != 0 {
			items := make([]grammar.Expr, len(r.Rune))
			for i, ch := range r.Rune {
				items[i] = foldClass(ch)
			}
			return &grammar.Seq{Items: items}, nil
		}
		return &grammar.Literal{Text: string(r.Rune)}, nil
	case syntax.OpCharClass:
		cls := &grammar.Class{}
		for i := 0; i+1 < len(r.Rune); i += 2 {
			lo, hi := r.Rune[i], r.Rune[i+1]
			cls.Ranges = append(cls.Ranges, grammar.RuneRange{Lo: lo, Hi: hi})
		}
		return cls, nil
	case syntax.OpAnyCharNotNL:
		return &grammar.Class{Negated: true, Ranges: []grammar.RuneRange{{Lo: '\n', Hi: '\n'}}}, nil
	case syntax.OpAnyChar:
		return &grammar.Class{Negated: true}, nil
	case syntax.OpBeginText:
		if !atStart {
			return nil, c.errf("^ or \\A is only supported at the start (the whole output must match)")
		}
		return &grammar.Seq{}, nil
	case syntax.OpEndText:
		if !atEnd {
			return nil, c.errf("$ or \\z is only supported at the end (the whole output must match)")
		}
		return &grammar.Seq{}, nil
	case syntax.OpBeginLine, syntax.OpEndLine:
		return nil, c.errf("line anchors (multi-line mode) are not supported")
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return nil, c.errf("word boundaries (\\b, \\B) are not supported")
	case syntax.OpCapture:
		return c.expr(r.Sub[0], atStart, atEnd)
	case syntax.OpConcat:
		seq := &grammar.Seq{}
		for i, sub := range r.Sub {
			e, err := c.expr(sub, atStart && i == 0, atEnd && i == len(r.Sub)-1)
			if err != nil {
				return nil, err
			}
			seq.Items = append(seq.Items, e)
		}
		return seq, nil
	case syntax.OpAlternate:
		alt := &grammar.Alt{}
		for _, sub := range r.Sub {
			e, err := c.expr(sub, atStart, atEnd)
			if err != nil {
				return nil, err
			}
			alt.Alts = append(alt.Alts, e)
		}
		return alt, nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		sub, err := c.expr(r.Sub[0], false, false)
		if err != nil {
			return nil, err
		}
		rep := &grammar.Repeat{Expr: sub}
		switch r.Op {
		case syntax.OpStar:
			rep.Min, rep.Max = 0, -1
		case syntax.OpPlus:
			rep.Min, rep.Max = 1, -1
		case syntax.OpQuest:
			rep.Min, rep.Max = 0, 1
		default:
			if r.Min > grammar.MaxRepeat || r.Max > grammar.MaxRepeat {
				return nil, c.errf("repetition count above %d", grammar.MaxRepeat)
			}
			rep.Min, rep.Max = r.Min, r.Max
		}
		return rep, nil
	}
	return nil, c.errf("unsupported construct %s", r)
}

// foldClass matches ch and every case variant of it.
func foldClass(ch rune) grammar.Expr {
	cls := &grammar.Class{Ranges: []grammar.RuneRange{{Lo: ch, Hi: ch}}}
	for f := unicode.SimpleFold(ch); f != ch; f = unicode.SimpleFold(f) {
		cls.Ranges = append(cls.Ranges, grammar.RuneRange{Lo: f, Hi: f})
	}
	return cls
}
