package constraint

import (
	"cmp"
	"reflect"
	"slices"
	"sync"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/internal/bounded"
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

// maxUnionParts is the most repetitions whose union a walk takes as one slice.
const maxUnionParts = 4

// unionKey names the union of two to maxUnionParts automata for a trie (as a child slice or
// not). The pointers keep the automata alive while the entry exists, so an address is never
// that of another automaton.
type unionKey struct {
	trie  *tokentrie.Trie
	parts [maxUnionParts]*earley.Automaton
	child bool
}

// unions caches the slices of unions: *tokentrie.Slice or *tokentrie.ChildSlice (nil when the
// union is too large), at most 4 096, then it starts over.
var unions = bounded.New[unionKey, any](4096)

// union returns the cached slice of parts' union under key, computing it with build (from the
// union automaton, or from the single part) on first use.
func union(trie *tokentrie.Trie, parts []*earley.Automaton, child bool, build func(tokentrie.Automaton) any) any {
	switch {
	case len(parts) == 0 || len(parts) > maxUnionParts:
		return nil
	case len(parts) == 1: // kept with the automaton
		type key struct {
			trie  *tokentrie.Trie
			child bool
		}
		return parts[0].Memo(key{trie, child}, func() any { return build(parts[0]) })
	}
	k := unionKey{trie: trie, child: child}
	copy(k.parts[:], parts)
	slices.SortFunc(k.parts[:len(parts)], func(a, b *earley.Automaton) int { return cmp.Compare(a.ID(), b.ID()) }) // one entry per set
	if v, ok := unions.Load(k); ok {
		return v
	}
	var v any
	as := make([]tokentrie.Automaton, len(parts))
	for i, p := range k.parts[:len(parts)] {
		as[i] = p
	}
	if u := tokentrie.Union(as...); u != nil {
		v = build(u)
	}
	unions.Store(k, v)
	return v
}

// unionSliceFor returns trie's slice of the union of parts (any number of copies each), or nil.
func unionSliceFor(trie *tokentrie.Trie, parts []*earley.Automaton) *tokentrie.Slice {
	if len(parts) == 1 {
		return sliceFor(trie, earley.Run{Automaton: parts[0], Budget: -1})
	}
	s, _ := union(trie, parts, false, func(a tokentrie.Automaton) any { return trie.Slice(a, -1) }).(*tokentrie.Slice)
	return s
}

// unionChildSliceFor returns trie's child slice of the union of parts, or nil.
func unionChildSliceFor(trie *tokentrie.Trie, parts []*earley.Automaton) *tokentrie.ChildSlice {
	s, _ := union(trie, parts, true, func(a tokentrie.Automaton) any { return trie.ChildSlice(a) }).(*tokentrie.ChildSlice)
	return s
}
