package earley

import (
	"encoding/binary"
	"fmt"
	bits64 "math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/internal/bounded"
	"github.com/loomlm/loom/constraint/internal/digest"
)

// Repetitions. The grammar compiler writes X* as a nonterminal L → ε | L X, and X{m,n} as m
// copies of X followed by a chain opt_k → ε | X opt_{k-1} (k = n-m). When the last set holds
// an item whose next symbol is X and which may consume r copies of X from here — L → L • X
// (any number), or • X X … opt_k (the copies written in a row plus the chain's k) — the parser
// accepts every byte string that is a prefix of at most r copies of X: the item consumes them,
// and every nonterminal derives some string, so it can go on. A token mask can therefore take
// every token whose bytes are such a prefix without asking the parser about each (package
// tokentrie computes that set once per vocabulary, body and budget: a "slice") and walk only
// the rest. This is what keeps masks cheap inside JSON strings, where nearly every token of a
// large vocabulary is allowed.
//
// Automaton is X* as a deterministic automaton over bytes, built from X by Glushkov's
// construction and the subset construction, when X derives a regular language through
// acyclic rules (a character class, a JSON string character with its escapes, a Unicode
// property) within limits (maxPositions terminal occurrences, maxStates states, maxWork). Each
// transition also says whether it starts a new copy of X, so that a bounded repetition can be
// held to its budget; when that is ambiguous (a byte that may both continue a copy and start
// the next), only unbounded uses are made.
type Automaton struct {
	key   string
	trans []uint16 // trans[(s-1)*256+b]: the state after byte b from state s (0: dead)
	start []uint64 // bit (s-1)*256+b: that transition starts a new copy of X
	// counted: the copies a byte string starts are well defined.
	counted bool
	memo    sync.Map
	// first is the start state (1 when 0): a prefix automaton of a grammar rule starts at
	// that rule's state of its group's automaton.
	first uint32
	id    uint64 // unique among automata
}

// automatonIDs numbers automata.
var automatonIDs atomic.Uint64

// ID is unique among the automata of the process: an order for sets of them.
func (a *Automaton) ID() uint64 { return a.id }

// maxWork bounds states × positions in a determinization: a counted repetition of a long
// string (a list of strings of at most 200 characters) has thousands of positions and
// would reach maxStates only after seconds.
const maxWork = 1 << 22

const (
	maxPositions = 4096
	maxStates    = 4096
)

// Key identifies the automaton by its transitions: automata with equal keys accept the same
// bytes and count copies alike, whichever grammar they come from.
func (a *Automaton) Key() string { return a.key }

// Start is the initial state: a boundary between copies of X.
func (a *Automaton) Start() uint32 {
	if a.first != 0 {
		return a.first
	}
	return 1
}

// Step returns the state after byte b from state s (0: b cannot follow) and whether b starts
// a new copy of X.
func (a *Automaton) Step(s uint32, b byte) (uint32, bool) {
	i := (int(s)-1)*256 + int(b)
	return uint32(a.trans[i]), a.start[i>>6]&(1<<(i&63)) != 0
}

// Counted reports whether Step's copies are exact.
func (a *Automaton) Counted() bool { return a.counted }

// Memo returns the value cached under key for this automaton, computing it with make on
// first use (users keep what they derive from it, such as a vocabulary slice, for as long as
// the automaton lives).
func (a *Automaton) Memo(key any, make func() any) any {
	if v, ok := a.memo.Load(key); ok {
		return v
	}
	v, _ := a.memo.LoadOrStore(key, make())
	return v
}

// grammarRuns is a grammar's repetitions, shared by a matcher and its clones: for each
// nonterminal, the body X and bound of the repetition it is (unbounded for L → ε | L X; k for
// a chain opt_k; 0 if it is neither), and the automata of the bodies met so far.
type grammarRuns struct {
	g     *grammar.CFG
	body  []grammar.Symbol
	bound []int
	// alias maps a symbol whose rules equal those of a repetition's body to that body (its
	// representative); written only while the runs are built.
	alias map[grammar.Symbol]grammar.Symbol

	mu       sync.Mutex
	automata map[[2]grammar.Symbol]*Automaton // nil: not regular within the limits
	// long[n] tells whether a repetition too long for an automaton is reachable from n (nil:
	// from none), once longKnown.
	long      []bool
	longKnown bool
	// prefixes[nt] is nt's prefix automaton once resolved (noPrefix: none); nil when the
	// grammar has no Prefixes.
	prefixes []atomic.Pointer[Automaton]
	// canon is the last keyCanon made (AppendStateKeyWithin).
	canon atomic.Pointer[keyCanon]
	// itemRuns[prodStart[prod]+dot] is the run of the items at (prod, dot), resolved on first
	// use (ActiveRuns asks for every item of a state: each asked a mutex and a map).
	prodStart []int32
	itemRuns  []atomic.Pointer[itemRun]
}

// itemRun is the run of the items at one production and dot (ok false: none).
type itemRun struct {
	run Run
	ok  bool
}

// unbounded is the bound of L → ε | L X.
const unbounded = -1

// grammarRuns returns the grammar's item automata, made on first use and shared with clones
// and with every other matcher of the grammar (grammar.CFG.Derived).
func (m *Matcher) grammarRuns() *grammarRuns {
	if r := m.runs.Load(); r != nil {
		return r
	}
	r := m.g.Derived(runsKey{}, func() any { return newRuns(m.g) }).(*grammarRuns)
	if m.runs.CompareAndSwap(nil, r) {
		return r
	}
	return m.runs.Load()
}

// runsKey is the key of a grammar's grammarRuns among its derived values.
type runsKey struct{}

func newRuns(g *grammar.CFG) *grammarRuns {
	r := &grammarRuns{g: g, body: make([]grammar.Symbol, len(g.Names)), bound: make([]int, len(g.Names)), automata: map[[2]grammar.Symbol]*Automaton{}}
	r.prodStart = make([]int32, len(g.Prods))
	items := int32(0)
	for i, p := range g.Prods {
		r.prodStart[i] = items
		items += int32(len(p.RHS))
	}
	r.itemRuns = make([]atomic.Pointer[itemRun], items)
	if len(g.Prefixes) > 0 {
		r.prefixes = make([]atomic.Pointer[Automaton], len(g.Names))
	}
	keys := map[grammar.Symbol]string{}
	key := func(s grammar.Symbol) string {
		k, ok := keys[s]
		if !ok {
			k = string(grammarKey(nil, g, s)) // "" when recursive
			keys[s] = k
		}
		return k
	}
	// canon returns the representative of the symbols with s's rules (the first met), making
	// it s's: a translation may write a repetition's body once per copy. Every symbol maps to
	// a representative that maps to itself, so rep is one lookup.
	byKey := map[string]grammar.Symbol{}
	canon := func(s grammar.Symbol) grammar.Symbol {
		if y, ok := r.alias[s]; ok {
			return y
		}
		k := key(s)
		if k == "" {
			return s
		}
		y, ok := byKey[k]
		if !ok {
			byKey[k] = s
			return s
		}
		if r.alias == nil {
			r.alias = map[grammar.Symbol]grammar.Symbol{}
		}
		r.alias[s] = y
		return y
	}
	// same reports whether x and y have the same rules.
	same := func(x, y grammar.Symbol) bool {
		return r.rep(x) == r.rep(y) || canon(x) == canon(y)
	}
	done := make([]bool, len(g.Names))
	var visit func(n int32)
	visit = func(n int32) {
		if done[n] {
			return
		}
		done[n] = true
		prods := g.ByLHS[n]
		if len(prods) == 1 {
			switch rhs := g.Prods[prods[0]].RHS; {
			case len(rhs) == 1 && !rhs[0].IsTerminal() && rhs[0] != grammar.Symbol(n):
				// N ::= M, M a repetition: N is the same repetition
				m := int32(rhs[0])
				visit(m)
				if r.bound[m] == unbounded {
					r.body[n], r.bound[n] = r.body[m], unbounded
				}
			case len(rhs) == 2 && !rhs[1].IsTerminal() && rhs[1] != grammar.Symbol(n):
				// N ::= X M, M a repetition of X: every prefix of N is one of M's with a copy
				// more (a repetition's required copies, X{3,} as X X X X*)
				next := int32(rhs[1])
				visit(next)
				if r.bound[next] != 0 && same(rhs[0], r.body[next]) {
					r.body[n], r.bound[n] = r.rep(r.body[next]), r.bound[next]
					if r.bound[next] != unbounded {
						r.bound[n]++
					}
				}
			}
			return
		}
		if len(prods) != 2 {
			return
		}
		a, b := g.Prods[prods[0]].RHS, g.Prods[prods[1]].RHS
		if len(a) != 0 {
			a, b = b, a
		}
		switch {
		case len(a) != 0:
		case len(b) == 2 && b[0] == grammar.Symbol(n) && b[1] != grammar.Symbol(n):
			r.body[n], r.bound[n] = r.rep(b[1]), unbounded
		case len(b) == 1 && b[0] != grammar.Symbol(n):
			r.body[n], r.bound[n] = r.rep(b[0]), 1
		case len(b) == 2 && !b[1].IsTerminal() && b[1] != grammar.Symbol(n):
			next := int32(b[1])
			visit(next)
			if r.bound[next] > 0 && same(b[0], r.body[next]) {
				r.body[n], r.bound[n] = r.rep(r.body[next]), 1+r.bound[next]
			}
		}
	}
	for n := range g.Names {
		visit(int32(n))
	}
	return r
}

// rep returns the representative of the symbols with x's rules (x itself when it has none).
func (r *grammarRuns) rep(x grammar.Symbol) grammar.Symbol {
	if y, ok := r.alias[x]; ok {
		return y
	}
	return x
}

// automaton returns the automaton of X*, or with lead ≥ 0 of X Y* where Y* is the repetition
// lead (a single run, which counts no copies), building it on first use; nil if it is not
// regular within the limits.
func (r *grammarRuns) automaton(x grammar.Symbol, lead grammar.Symbol) *Automaton {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]grammar.Symbol{x, lead}
	a, ok := r.automata[k]
	if !ok {
		if !r.longChain(x) && (lead < 0 || !r.longChain(r.body[lead])) {
			a = cachedAutomaton(r.g, x, lead, r.body)
		}
		r.automata[k] = a
	}
	return a
}

// maxChainInAutomaton is the longest bounded repetition (X{0,k}: a chain of k optional copies)
// an automaton's sub-grammar may hold. A chain of k copies has k times the positions of X and
// about k times its states, so the automaton of a run that holds a string of at most 200
// characters (the items of an array of such strings, 20 positions a character) has thousands
// of positions and fails its limits only after 5–70 ms of work — on the first mask at the
// start of every such string, for every maxLength a process meets — where the slice it would
// give holds the few tokens that span the end of one item and the start of the next. The
// string's own characters are a run of their own (a slice with a budget).
const maxChainInAutomaton = 16

// longChain reports whether the sub-grammar reachable from x holds a bounded repetition of
// more than maxChainInAutomaton copies. The nonterminals that reach one are found once per
// grammar (r.mu held), backwards from the long repetitions, which most grammars do not have.
func (r *grammarRuns) longChain(x grammar.Symbol) bool {
	if x.IsTerminal() {
		return false
	}
	if !r.longKnown {
		r.longKnown = true
		r.long = reachingLongChains(r.g, r.bound)
	}
	return r.long != nil && r.long[x]
}

// reachingLongChains marks the nonterminals of g from which one whose bound is past
// maxChainInAutomaton is reachable (itself included), or returns nil if none is.
func reachingLongChains(g *grammar.CFG, bound []int) []bool {
	var stack []int32
	for n, b := range bound {
		if b > maxChainInAutomaton {
			stack = append(stack, int32(n))
		}
	}
	if len(stack) == 0 {
		return nil
	}
	users := make([][]int32, len(g.Names)) // users[m]: the nonterminals with m in a rule
	for _, p := range g.Prods {
		for _, s := range p.RHS {
			if !s.IsTerminal() {
				users[s] = append(users[s], p.LHS)
			}
		}
	}
	long := make([]bool, len(g.Names))
	for _, n := range stack {
		long[n] = true
	}
	for len(stack) > 0 {
		m := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, n := range users[m] {
			if !long[n] {
				long[n] = true
				stack = append(stack, n)
			}
		}
	}
	return long
}

// cachedAutomaton returns the automaton of x* (lead < 0) or of x body[lead]*, from the cache
// of automata by sub-grammar when an equal one was built before (a schema compiled again, or
// another with the same string rules): the position automaton of a large character class
// costs more to build than its cached determinization saves.
func cachedAutomaton(g *grammar.CFG, x, lead grammar.Symbol, body []grammar.Symbol) *Automaton {
	var key []byte
	if lead < 0 {
		key = grammarKey(append(key, "loop"...), g, x)
	} else {
		key = grammarKey(append(key, "lead"...), g, x, body[lead])
		if len(key) > maxLeadKeyBytes {
			return nil
		}
	}
	if key == nil { // recursive: not regular
		return nil
	}
	automata.Lock()
	a, ok := automata.byGrammar[string(key)]
	automata.Unlock()
	if ok {
		return a
	}
	automata.built.Add(1)
	if lead < 0 {
		a = newAutomaton(g, x)
	} else {
		a = newLeadAutomaton(g, x, body[lead])
	}
	automata.Lock()
	if automata.byGrammar == nil || len(automata.byGrammar) >= maxCachedAutomata {
		automata.byGrammar = map[string]*Automaton{}
	}
	automata.byGrammar[string(key)] = a
	automata.Unlock()
	return a
}

// grammarKey appends to dst a canonical form of the sub-grammar reachable from syms, or
// returns nil if it is recursive (a nonterminal reachable from itself, which no position
// automaton expands): nonterminals are numbered in the order of a depth-first visit (a
// nonterminal met again is written as its number), terminals are written as their byte sets,
// productions and their symbols in order. Glushkov's construction reads nothing else, so equal
// keys give the same automaton.
func grammarKey(dst []byte, g *grammar.CFG, syms ...grammar.Symbol) []byte {
	type visit struct {
		id   int
		open bool // being visited: met again, it is recursive
	}
	seen := map[int32]*visit{}
	recursive := false
	var walk func(s grammar.Symbol)
	walk = func(s grammar.Symbol) {
		if recursive {
			return
		}
		if s.IsTerminal() {
			dst = append(dst, 't')
			for _, w := range g.Terminals[s.Terminal()] {
				dst = binary.LittleEndian.AppendUint64(dst, w)
			}
			return
		}
		nt := int32(s)
		if v := seen[nt]; v != nil {
			recursive = recursive || v.open
			dst = binary.AppendUvarint(append(dst, 'r'), uint64(v.id))
			return
		}
		v := &visit{id: len(seen), open: true}
		seen[nt] = v
		dst = binary.AppendUvarint(append(dst, 'n'), uint64(len(g.ByLHS[nt])))
		for _, pi := range g.ByLHS[nt] {
			rhs := g.Prods[pi].RHS
			dst = binary.AppendUvarint(dst, uint64(len(rhs)))
			for _, y := range rhs {
				walk(y)
			}
		}
		v.open = false
	}
	for _, s := range syms {
		walk(s)
	}
	if recursive {
		return nil
	}
	return dst
}

// prefixAutomata holds one Automaton per prefix automaton's transitions and start, so that
// every compile of a grammar gets the same one (and the slices kept with it); past
// maxCachedAutomata it starts over.
var prefixAutomata = bounded.New[prefixKey, *Automaton](maxCachedAutomata)

type prefixKey struct {
	trans *uint16
	start uint32
}

// noPrefix marks, in grammarRuns.prefixes, a nonterminal found to have no prefix automaton.
var noPrefix = new(Automaton)

// prefix returns the automaton of the prefixes of nonterminal nt's strings (grammar.CFG's
// Prefixes), or nil; it is resolved once per nonterminal (ActiveRuns asks for every item).
func (r *grammarRuns) prefix(nt int32) *Automaton {
	if r.prefixes == nil {
		return nil
	}
	a := r.prefixes[nt].Load()
	if a == nil {
		a = prefixAutomaton(r.g.Prefixes[nt])
		if a == nil {
			a = noPrefix
		}
		r.prefixes[nt].Store(a)
	}
	if a == noPrefix {
		return nil
	}
	return a
}

// prefixAutomaton returns the Automaton of p, one per transitions and start, or nil.
func prefixAutomaton(p *grammar.PrefixAutomaton) *Automaton {
	if p == nil {
		return nil
	}
	trans, start, key, ok := p.DFA()
	if !ok {
		return nil
	}
	k := prefixKey{&trans[0], start}
	if a, ok := prefixAutomata.Load(k); ok {
		return a
	}
	a := &Automaton{key: fmt.Sprintf("%s@%d", key, start), trans: trans, start: make([]uint64, (len(trans)+63)/64), first: start, id: automatonIDs.Add(1)}
	a, _ = prefixAutomata.LoadOrStore(k, a)
	return a
}

// budget returns how many copies of X = RHS[dot] the item (prod, dot) may consume from here.
func (r *grammarRuns) budget(prod, dot int32) int {
	p := &r.g.Prods[prod]
	x := r.rep(p.RHS[dot])
	if dot == 1 && len(p.RHS) == 2 && p.RHS[0] == grammar.Symbol(p.LHS) && r.bound[p.LHS] == unbounded {
		return unbounded
	}
	j := int(dot)
	for j < len(p.RHS) && r.rep(p.RHS[j]) == x {
		j++
	}
	n := j - int(dot)
	if j < len(p.RHS) && !p.RHS[j].IsTerminal() {
		next := int32(p.RHS[j])
		if r.bound[next] != 0 && r.rep(r.body[next]) == x {
			if r.bound[next] == unbounded {
				return unbounded
			}
			n += r.bound[next]
		}
	}
	return n
}

// Run is a repetition the parser may run from its current state: every prefix of at most
// Budget copies of the automaton's X (Budget < 0: any number) is accepted.
type Run struct {
	Automaton *Automaton
	Budget    int
}

// minBudget is the fewest copies worth a vocabulary slice: shorter runs are as cheap to walk.
const minBudget = 4

// ActiveRuns appends to dst the repetitions the parser may run from its current state (each
// pair once) and returns the extended slice.
func (m *Matcher) ActiveRuns(dst []Run) []Run {
	r := m.grammarRuns()
	s := m.sets[len(m.sets)-1]
	for i := range s.items {
		it := &s.items[i]
		if it.next == complete {
			continue
		}
		j := r.prodStart[it.prod] + it.dot
		e := r.itemRuns[j].Load()
		if e == nil {
			e = &itemRun{}
			e.run, e.ok = r.itemRunOf(it.prod, it.dot, it.next)
			r.itemRuns[j].Store(e)
		}
		if e.ok && !slices.Contains(dst, e.run) {
			dst = append(dst, e.run)
		}
	}
	return dst
}

// itemRunOf returns the run of the items at (prod, dot), whose next symbol is next: next's
// prefix automaton when it has one, else the repetition of next the item may consume copies
// of (a budget of minBudget copies or more), or next followed by a repetition after it.
func (r *grammarRuns) itemRunOf(prod, dot int32, next grammar.Symbol) (Run, bool) {
	if r.prefixes != nil && !next.IsTerminal() {
		if a := r.prefix(int32(next)); a != nil {
			return Run{a, unbounded}, true
		}
	}
	n := r.budget(prod, dot)
	lead := grammar.Symbol(-1)
	if n >= 0 && n < minBudget {
		// X followed by a repetition Y*: one run of X Y*.
		rhs := r.g.Prods[prod].RHS
		if int(dot)+1 >= len(rhs) || rhs[dot+1].IsTerminal() || r.bound[rhs[dot+1]] != unbounded {
			return Run{}, false
		}
		lead, n = rhs[dot+1], unbounded
	}
	a := r.automaton(next, lead)
	if a == nil || (n >= 0 && !a.counted) {
		return Run{}, false
	}
	return Run{a, n}, true
}

// newLeadAutomaton builds the automaton of x y*, or nil. It starts no copies (it is only
// used unbounded).
func newLeadAutomaton(g *grammar.CFG, x, y grammar.Symbol) *Automaton {
	b := &glushkov{g: g, follow: []bits{nil}, visit: map[int32]bool{}}
	fx := b.symbol(x)
	fy := b.symbol(y)
	if b.failed || fx.first.empty() || fy.first.empty() {
		return nil
	}
	b.connect(fy.last, fy.first) // y*
	b.connect(fx.last, fy.first)
	b.follow[0] = append(bits(nil), fx.first...)
	if fx.nullable {
		b.follow[0].union(fy.first)
	}
	within := make([]bits, len(b.follow))
	for p := range b.follow {
		within[p] = append(bits(nil), b.follow[p]...)
	}
	return b.cached("lead", within, nil, nil)
}

// newAutomaton builds the automaton of x*, or nil.
func newAutomaton(g *grammar.CFG, x grammar.Symbol) *Automaton {
	b := &glushkov{g: g, follow: []bits{nil}, visit: map[int32]bool{}}
	f := b.symbol(x)
	if b.failed || f.first.empty() {
		return nil
	}
	// Within a copy, position p leads to within[p]; X*'s boundary (position 0 and X's last
	// positions) also leads to X's first positions, which starts a new copy.
	within := make([]bits, len(b.follow))
	for p := range b.follow {
		within[p] = append(bits(nil), b.follow[p]...)
	}
	b.follow[0] = f.first
	b.connect(f.last, f.first)
	boundary := append(bits(nil), f.last...)
	boundary.add(0)
	return b.cached("loop", within, boundary, f.first)
}

// automata caches determinized automata by their position automaton, across grammars: every
// JSON schema's string character, say, has the same one, and so shares its vocabulary slices.
var automata struct {
	sync.Mutex
	byNFA map[digest.Digest]*Automaton // nil: beyond the limits
	// byGrammar holds the same automata by the sub-grammar they were built from (see
	// grammarKey); built counts the position automata built on a miss (tests).
	byGrammar map[string]*Automaton
	built     atomic.Int64
}

// maxLeadKeyBytes bounds the sub-grammar (its grammarKey) of a lead automaton X Y*: a larger
// one (a Unicode property class as X or Y) costs 20–30 ms to build and as much again for its
// vocabulary slice on a 128k vocabulary, for a state a schema's documents pass once (a name
// just past the names it excludes), where the walk it replaces costs about 2 ms. Without
// the bound the Llama 3 mask benchmark's first pass averaged 162–168 µs a mask with a
// 79–84 ms maximum; with it, 150–157 µs and 42–56 ms (three passes: 84 → 78–80 µs, p99
// 531–539 → 486–491 µs).
const maxLeadKeyBytes = 32 << 10

// maxCachedAutomata bounds the cache; past it, it starts over.
const maxCachedAutomata = 1024

// cached returns the determinized automaton of b's positions, from the cache when an equal
// position automaton was determinized before. The cache is keyed by the position automaton's
// digest: its description grows with the square of the positions (a Unicode class's run has
// thousands), and kept as a key it was most of what the cache held.
func (b *glushkov) cached(kind string, within []bits, boundary, first bits) *Automaton {
	h := digest.New()
	h.String(kind)
	h.Uint64(uint64(len(b.follow)))
	for p := range b.follow {
		if p > 0 {
			h.Uint64s(b.sets[p-1][:])
		}
		h.Uint64s(b.follow[p])
		h.Uint64s(within[p])
	}
	h.Uint64s(boundary)
	h.Uint64s(first)
	k := h.Sum()
	automata.Lock()
	a, ok := automata.byNFA[k]
	automata.Unlock()
	if ok {
		return a
	}
	a = b.determinize(kind, within, boundary, first)
	automata.Lock()
	if automata.byNFA == nil || len(automata.byNFA) >= maxCachedAutomata {
		automata.byNFA = map[digest.Digest]*Automaton{}
	}
	automata.byNFA[k] = a
	automata.Unlock()
	return a
}

// bits is a set of NFA positions.
type bits []uint64

func (b bits) has(p int) bool { return p>>6 < len(b) && b[p>>6]&(1<<(p&63)) != 0 }

func (b *bits) add(p int) {
	for p>>6 >= len(*b) {
		*b = append(*b, 0)
	}
	(*b)[p>>6] |= 1 << (p & 63)
}

func (b *bits) union(o bits) {
	for len(*b) < len(o) {
		*b = append(*b, 0)
	}
	for i, w := range o {
		(*b)[i] |= w
	}
}

func (b bits) empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// glushkov builds a position automaton: position 0 is the start, position p > 0 the p-th
// terminal occurrence.
type glushkov struct {
	g      *grammar.CFG
	sets   []grammar.ByteSet // sets[p-1]: position p's bytes
	follow []bits            // follow[p]: the positions that may come after p
	visit  map[int32]bool    // nonterminals being expanded (recursion is not regular)
	failed bool
}

// frag is the automaton of a sub-expression: its first and last positions and whether it
// derives the empty string.
type frag struct {
	first, last bits
	nullable    bool
}

func (b *glushkov) connect(from, to bits) {
	for i, w := range from {
		for w != 0 {
			p := i*64 + bits64.TrailingZeros64(w)
			w &= w - 1
			b.follow[p].union(to)
		}
	}
}

func (b *glushkov) sequence(syms []grammar.Symbol) frag {
	seq := frag{nullable: true}
	for _, sym := range syms {
		f := b.symbol(sym)
		if b.failed {
			return frag{}
		}
		b.connect(seq.last, f.first)
		if seq.nullable {
			seq.first.union(f.first)
		}
		if f.nullable {
			seq.last.union(f.last)
		} else {
			seq.last = append(bits(nil), f.last...)
		}
		seq.nullable = seq.nullable && f.nullable
	}
	return seq
}

func (b *glushkov) symbol(s grammar.Symbol) frag {
	if b.failed {
		return frag{}
	}
	if s.IsTerminal() {
		if len(b.sets) == maxPositions {
			b.failed = true
			return frag{}
		}
		b.sets = append(b.sets, b.g.Terminals[s.Terminal()])
		b.follow = append(b.follow, nil)
		var p bits
		p.add(len(b.sets))
		return frag{first: p, last: append(bits(nil), p...)}
	}
	nt := int32(s)
	if b.visit[nt] {
		b.failed = true
		return frag{}
	}
	b.visit[nt] = true
	defer delete(b.visit, nt)
	var out frag
	for _, pi := range b.g.ByLHS[nt] {
		f := b.sequence(b.g.Prods[pi].RHS)
		if b.failed {
			return frag{}
		}
		out.first.union(f.first)
		out.last.union(f.last)
		out.nullable = out.nullable || f.nullable
	}
	return out
}

// determinize builds the deterministic automaton of the positions' follow sets from position
// 0, marking transitions that start a new copy; nil when it exceeds maxStates.
func (b *glushkov) determinize(kind string, within []bits, boundary, first bits) *Automaton {
	var byByte [256]bits
	for p, s := range b.sets {
		for c := range 256 {
			if s.Has(byte(c)) {
				byByte[c].add(p + 1)
			}
		}
	}
	// keyBuf is a set's key: its words up to the last non-zero one, little-endian (a map
	// lookup by string(keyBuf) does not allocate; only a new state's key is copied).
	var keyBuf []byte
	key := func(s bits) []byte {
		for len(s) > 0 && s[len(s)-1] == 0 {
			s = s[:len(s)-1]
		}
		keyBuf = keyBuf[:0]
		for _, w := range s {
			keyBuf = binary.LittleEndian.AppendUint64(keyBuf, w)
		}
		return keyBuf
	}
	// andInto sets *dst to x ∩ y, reusing its storage; intersects reports whether x ∩ y is
	// not empty.
	andInto := func(dst *bits, x, y bits) {
		n := min(len(x), len(y))
		*dst = slices.Grow((*dst)[:0], n)[:n]
		for i := range n {
			(*dst)[i] = x[i] & y[i]
		}
	}
	intersects := func(x, y bits) bool {
		for i := 0; i < len(x) && i < len(y); i++ {
			if x[i]&y[i] != 0 {
				return true
			}
		}
		return false
	}
	// rep[c] is the first byte that occurs at exactly the positions c does: every state
	// moves both alike, so the move is computed once per class of bytes.
	var rep [256]int
	firstOf := map[string]int{}
	for c := range 256 {
		k := key(byByte[c])
		if r, ok := firstOf[string(k)]; ok {
			rep[c] = r
		} else {
			firstOf[string(k)], rep[c] = c, c
		}
	}
	var start bits
	start.add(0)
	ids := map[string]int{string(key(start)): 1}
	queue := []bits{start}
	a := &Automaton{counted: true, id: automatonIDs.Add(1)}
	// starts bit i: transition i starts a copy (grown with a.trans, a word per 64)
	var starts []uint64
	setStart := func(i int) { starts[i>>6] |= 1 << (i & 63) }
	isStart := func(i int) bool { return starts[i>>6]&(1<<(i&63)) != 0 }
	var f, w, t bits // scratch: a state's follow and within sets, a move's target
	for q := 0; q < len(queue); q++ {
		clear(f)
		clear(w)
		onBoundary := false
		for wi, word := range queue[q] { // the state's positions, by their set bits
			for word != 0 {
				p := wi*64 + bits64.TrailingZeros64(word)
				word &= word - 1
				f.union(b.follow[p])
				w.union(within[p])
				onBoundary = onBoundary || boundary.has(p)
			}
		}
		var fresh bits // positions reached by starting a new copy
		if onBoundary {
			fresh = first
		}
		base := len(a.trans)
		if cap(a.trans)-base < 256 { // double: append grows large slices by a quarter, copying often
			a.trans = append(make([]uint16, 0, max(2*cap(a.trans), 16*256)), a.trans...)
			starts = append(make([]uint64, 0, cap(a.trans)/64), starts...)
		}
		starts = starts[:(base+256)/64] // a state's 256 transitions are four whole words
		clear(starts[base/64:])
		for c := range 256 {
			if r := rep[c]; r != c { // the same positions as an earlier byte: the same move
				a.trans = append(a.trans, a.trans[base+r])
				if isStart(base + r) {
					setStart(base + c)
				}
				continue
			}
			andInto(&t, f, byByte[c])
			if t.empty() {
				a.trans = append(a.trans, 0)
				continue
			}
			// t lies within byByte[c], so a fresh copy reaches it when t meets fresh.
			inCopy, newCopy := intersects(t, w), intersects(t, fresh)
			if inCopy && newCopy {
				a.counted = false
			}
			k := key(t)
			id, ok := ids[string(k)]
			if !ok {
				if len(queue) == maxStates || len(queue)*len(b.follow) > maxWork {
					return nil
				}
				queue = append(queue, slices.Clone(t))
				id = len(queue)
				ids[string(k)] = id
			}
			a.trans = append(a.trans, uint16(id))
			if newCopy && !inCopy {
				setStart(base + c)
			}
		}
	}
	a.start = slices.Clone(starts)
	h := digest.New()
	h.Uint16s(a.trans)
	h.Uint64s(a.start)
	if a.counted {
		h.Uint64(1)
	}
	a.key = h.Key(kind)
	return a
}

// Table returns the automaton's transitions as a dense table (see tokentrie.Table): the
// passes over a vocabulary's trie read it directly.
func (a *Automaton) Table() (trans []uint16, start []uint64) { return a.trans, a.start }
