package grammar

import (
	"fmt"
	"strings"
	"sync"
)

// Symbol is a symbol of a CFG's right-hand side: a nonterminal when ≥ 0 (its index), a
// terminal when < 0 (terminal -s-1, a set of bytes).
type Symbol int32

// IsTerminal reports whether s is a terminal.
func (s Symbol) IsTerminal() bool { return s < 0 }

// Terminal is the index of terminal s in CFG.Terminals.
func (s Symbol) Terminal() int { return int(-s - 1) }

// ByteSet is a set of byte values.
type ByteSet [4]uint64

// Has reports whether b is in the set.
func (s *ByteSet) Has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// Add adds the bytes lo..hi.
func (s *ByteSet) Add(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

// Union adds every byte of o.
func (s *ByteSet) Union(o *ByteSet) {
	for i := range s {
		s[i] |= o[i]
	}
}

// Empty reports whether the set has no byte.
func (s *ByteSet) Empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }

// Production is one alternative of a nonterminal: LHS → RHS.
type Production struct {
	LHS int32
	RHS []Symbol
}

// CFG is a byte-level context-free grammar: terminals are sets of bytes, and every nonterminal
// derives at least one string (unproductive parts of the source grammar are removed), so a
// parser that keeps a prefix alive can always complete it.
type CFG struct {
	// Names of the nonterminals: source rules keep their names, helper rules made for groups,
	// repetitions and character classes are named after their rule with a suffix.
	Names []string
	// Prods lists the productions; ByLHS[n] are the indices of nonterminal n's productions.
	Prods []Production
	ByLHS [][]int32
	// Terminals are the byte sets terminal symbols refer to.
	Terminals []ByteSet
	// Nullable[n] reports whether nonterminal n derives the empty string.
	Nullable []bool
	// Start is the start nonterminal.
	Start int32
	// Prefixes, where set, give nonterminals whose strings are a regular language a byte
	// automaton of those strings' prefixes (see NewPrefixGroup), for a parser to take as
	// vocabulary slices.
	Prefixes map[int32]*PrefixAutomaton

	// derived holds the values made from the grammar for all its users (Derived).
	derived sync.Map
}

// Derived returns the value derived from g under key, made by build on first use: what the
// packages using a compiled grammar compute from it once for every user (the Earley parser's
// analysis of its repetitions, which every new parser of a grammar shared by many requests
// would otherwise compute again at its first mask). It is safe for concurrent use; when
// several goroutines ask first at once, build may run more than once and one value wins.
func (g *CFG) Derived(key any, build func() any) any {
	if v, ok := g.derived.Load(key); ok {
		return v
	}
	v, _ := g.derived.LoadOrStore(key, build())
	return v
}

// String writes the CFG one production per line, for debugging.
func (g *CFG) String() string {
	var b strings.Builder
	for _, p := range g.Prods {
		fmt.Fprintf(&b, "%s ::=", g.Names[p.LHS])
		for _, s := range p.RHS {
			if s.IsTerminal() {
				fmt.Fprintf(&b, " %s", g.Terminals[s.Terminal()].describe())
			} else {
				fmt.Fprintf(&b, " %s", g.Names[s])
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *ByteSet) describe() string {
	var b strings.Builder
	b.WriteByte('[')
	for c := 0; c < 256; c++ {
		if !s.Has(byte(c)) {
			continue
		}
		e := c
		for e+1 < 256 && s.Has(byte(e+1)) {
			e++
		}
		fmt.Fprintf(&b, "%02X", c)
		if e > c {
			fmt.Fprintf(&b, "-%02X", e)
		}
		c = e
	}
	b.WriteByte(']')
	return b.String()
}
