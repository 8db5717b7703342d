package toolcall

import (
	"github.com/loomlm/loom/constraint/grammar"
)

// compiled keeps the grammars of recent tools: an application sends the same tools with
// every request, and compiling them (translating each schema, then the grammar) takes from
// tens of microseconds for a small tool to tens of milliseconds for dozens of API schemas
// (BenchmarkGrammar).
var compiled = grammar.NewCache(32)

// Compile returns the compiled grammar of f.Grammar(tools, only, parallel), the same one for
// the same tools (by their names, schemas and strictness), format and choice while it stays
// among the last 32 compiled. A compiled grammar is read-only and shared by every processor
// made from it.
func (f Format) Compile(tools []Tool, only string, parallel bool) (*grammar.CFG, error) {
	parts := [][]byte{{byte(f), boolByte(parallel)}, []byte(only)}
	for _, t := range tools {
		parts = append(parts, []byte(t.Name), t.Parameters, []byte{boolByte(t.Strict)})
	}
	return compiled.Get(func() (*grammar.CFG, error) {
		g, err := f.Grammar(tools, only, parallel)
		if err != nil {
			return nil, err
		}
		return grammar.Compile(g, "root")
	}, parts...)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
