package constraint

import (
	"reflect"
	"sync"

	"github.com/loomlm/loom/constraint/earley"
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

// sliceFor returns trie's vocabulary slice for run r, kept with the run's automaton (the
// trie's own cache is keyed by the automaton's transitions; this spares hashing them on every
// mask).
func sliceFor(trie *tokentrie.Trie, r earley.Run) *tokentrie.Slice {
	type key struct {
		trie   *tokentrie.Trie
		budget int
	}
	s := r.Automaton.Memo(key{trie, r.Budget}, func() any { return trie.Slice(r.Automaton, r.Budget) })
	return s.(*tokentrie.Slice)
}

// childSliceFor returns trie's child slice for run r's automaton, kept with the automaton.
func childSliceFor(trie *tokentrie.Trie, r earley.Run) *tokentrie.ChildSlice {
	type key struct{ trie *tokentrie.Trie }
	s := r.Automaton.Memo(key{trie}, func() any { return trie.ChildSlice(r.Automaton) })
	return s.(*tokentrie.ChildSlice)
}
