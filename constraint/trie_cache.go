package constraint

import (
	"reflect"
	"sync"

	"github.com/loomlm/loom/constraint/tokentrie"
	"github.com/loomlm/loom/core"
)

// tries caches one token trie per tokenizer, shared by every constraint processor: a trie is
// built once per vocabulary, never per grammar or per sequence.
var tries sync.Map // core.Tokenizer → *trieEntry

type trieEntry struct {
	once sync.Once
	trie *tokentrie.Trie
}

// TrieFor returns the token trie of tok's vocabulary, building it on first use. Tokenizers of
// a comparable dynamic type (pointers, as every loom tokenizer is) share one cached trie.
func TrieFor(tok core.Tokenizer) *tokentrie.Trie {
	if !reflect.TypeOf(tok).Comparable() {
		return tokentrie.New(tok)
	}
	v, _ := tries.LoadOrStore(tok, &trieEntry{})
	e := v.(*trieEntry)
	e.once.Do(func() { e.trie = tokentrie.New(tok) })
	return e.trie
}
