package toolcall

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"

	"github.com/loomlm/loom/constraint/grammar"
)

// cacheSize is how many compiled grammars Compile keeps: an application sends the same tools
// with every request, and compiling them (translating each schema, then the grammar) takes
// from tens of microseconds for a small tool to tens of milliseconds for dozens of API
// schemas (BenchmarkGrammar).
const cacheSize = 32

var compiled = struct {
	sync.Mutex
	entries map[[32]byte]*grammar.CFG
	order   [][32]byte // oldest first
}{entries: map[[32]byte]*grammar.CFG{}}

// Compile returns the compiled grammar of f.Grammar(tools, only, parallel), the same one for
// the same tools (by their names, schemas and strictness), format and choice while it stays
// among the last cacheSize compiled. A compiled grammar is read-only and shared by every
// processor made from it.
func (f Format) Compile(tools []Tool, only string, parallel bool) (*grammar.CFG, error) {
	key := cacheKey(f, tools, only, parallel)
	compiled.Lock()
	cfg, ok := compiled.entries[key]
	compiled.Unlock()
	if ok {
		return cfg, nil
	}
	g, err := f.Grammar(tools, only, parallel)
	if err != nil {
		return nil, err
	}
	if cfg, err = grammar.Compile(g, "root"); err != nil {
		return nil, err
	}
	compiled.Lock()
	defer compiled.Unlock()
	if _, ok := compiled.entries[key]; !ok {
		if len(compiled.order) == cacheSize {
			delete(compiled.entries, compiled.order[0])
			compiled.order = compiled.order[1:]
		}
		compiled.entries[key] = cfg
		compiled.order = append(compiled.order, key)
	}
	return cfg, nil
}

// cacheKey digests what a grammar is made from; every part is length-prefixed.
func cacheKey(f Format, tools []Tool, only string, parallel bool) [32]byte {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	flags := []byte{byte(f), 0, 0}
	if parallel {
		flags[1] = 1
	}
	field(flags)
	field([]byte(only))
	for _, t := range tools {
		strict := []byte{0}
		if t.Strict {
			strict[0] = 1
		}
		field([]byte(t.Name))
		field(t.Parameters)
		field(strict)
	}
	var key [32]byte
	h.Sum(key[:0])
	return key
}
