package pipeline

import (
	"fmt"

	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/jsonschema"
)

// compiledGrammars keeps the grammars of the pipelines' constraint processors: a server
// builds a pipeline for every request, and an application sends the same schema (or
// response_format json_object's grammar) with each.
var compiledGrammars = grammar.NewCache(32)

// compileGBNF parses and compiles GBNF source from start, through the cache.
func compileGBNF(src, start string) (*grammar.CFG, error) {
	return compiledGrammars.Get(func() (*grammar.CFG, error) {
		g, err := grammar.Parse(src)
		if err != nil {
			return nil, err
		}
		return grammar.Compile(g, start)
	}, []byte("gbnf"), []byte(src), []byte(start))
}

// compileJSONSchema compiles a JSON Schema with opt, through the cache.
func compileJSONSchema(src string, opt jsonschema.Options) (*grammar.CFG, error) {
	return compiledGrammars.Get(func() (*grammar.CFG, error) { return jsonschema.Compile([]byte(src), opt) },
		[]byte("json_schema"), []byte(src), fmt.Appendf(nil, "%+v", opt))
}
