package constraint_test

import (
	"testing"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/jsonschema"
	"github.com/loomlm/loom/constraint/regex"
)

// walk feeds input to a matcher of g byte by byte, as far as the grammar accepts it, with a
// clone, a rollback and the walk calls a mask makes along the way: none may panic.
func walk(g *grammar.CFG, input []byte) {
	m := earley.New(g)
	for i, b := range input {
		if i%7 == 3 {
			c := m.Clone()
			c.BeginWalk()
			c.Advance(b)
			c.SameAsPrevious()
			c.EndWalk()
		}
		if !m.Advance(b) {
			break
		}
		if i%11 == 10 {
			_ = m.Rollback(m.Len() / 2)
		}
	}
	m.IsAccepting()
	m.IsDone()
}

// addCases seeds f with the source that source takes from each of llama.cpp's integration
// cases (those that have one), alone and with each string the case must accept.
func addCases(f *testing.F, source func(llamaCppCase) string) {
	for _, c := range llamaCppCases {
		if src := source(c); src != "" {
			f.Add(src, "")
			for _, p := range c.pass {
				f.Add(src, p)
			}
		}
	}
}

// FuzzGrammar compiles arbitrary GBNF and walks the text itself through the result: a grammar
// is compiled or refused with an error, never a panic. The seeds are llama.cpp's integration
// test grammars.
func FuzzGrammar(f *testing.F) {
	addCases(f, func(c llamaCppCase) string { return c.grammar })
	f.Fuzz(func(t *testing.T, src, input string) {
		if len(src) > 4096 {
			return
		}
		g, err := grammar.Parse(src)
		if err != nil {
			return
		}
		cfg, err := grammar.Compile(g, "root")
		if err != nil {
			return
		}
		walk(cfg, []byte(input))
	})
}

// FuzzRegex compiles arbitrary regular expressions to grammars and automata, and walks the
// input through the grammar.
func FuzzRegex(f *testing.F) {
	for _, re := range []string{`^[a-z]+@[a-z]+\.(com|org)$`, `\d{3}-\d{4}`, `(ab|cd)*e?`, `\p{Letter}+`, `[^"\\]{2,5}`, `a{0,3}b{2,}`, `(?:x|y)+z`, `.*`} {
		f.Add(re, "abc@def.com")
	}
	f.Fuzz(func(t *testing.T, re, input string) {
		if len(re) > 256 {
			return
		}
		if d, err := regex.DFAOf(re); err == nil {
			d.Match(input)
		}
		cfg, err := regex.Compile(re)
		if err != nil {
			return
		}
		walk(cfg, []byte(input))
	})
}

// FuzzJSONSchema compiles arbitrary JSON as a schema and walks the input through the
// grammar. The seeds are the integration test's schemas.
func FuzzJSONSchema(f *testing.F) {
	addCases(f, func(c llamaCppCase) string { return c.schema })
	f.Fuzz(func(t *testing.T, schema, input string) {
		if len(schema) > 4096 {
			return
		}
		cfg, err := jsonschema.Compile([]byte(schema), jsonschema.Options{})
		if err != nil {
			return
		}
		walk(cfg, []byte(input))
	})
}
