package regex

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/loomlm/loom/constraint/grammar"
)

// MaxStates bounds the states of an automaton built by this package (NFA or DFA); beyond it
// the construction fails with ErrTooLarge instead of growing without end.
const MaxStates = 4000

// ErrTooLarge is returned when an automaton would have more than MaxStates states.
var ErrTooLarge = fmt.Errorf("the automaton has more than %d states", MaxStates)

// maxRune is the last code point; the surrogates are never part of an alphabet.
const maxRune = 0x10FFFF

// universe is every code point but the surrogates.
var universe = []grammar.RuneRange{{Lo: 0, Hi: 0xD7FF}, {Lo: 0xE000, Hi: maxRune}}

// DFA is a deterministic automaton over code points. State 0 is the start; a code point with
// no edge leads to a dead state (one that accepts nothing). Edges are sorted and disjoint.
type DFA struct {
	States []State
}

// State is a state of a DFA.
type State struct {
	Accept bool
	Edges  []Edge
}

// Edge leads to state To on the code points Lo to Hi.
type Edge struct {
	Lo, Hi rune
	To     int
}

// DFAOf returns the DFA of the strings re matches in full (see Parse for the syntax).
func DFAOf(re string) (*DFA, error) {
	g, err := Parse(re)
	if err != nil {
		return nil, err
	}
	d, err := DFAOfExpr(g.Rules[0].Body)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", re, err)
	}
	return d, nil
}

// Literals returns the DFA of a finite set of strings.
func Literals(words []string) *DFA {
	d := &DFA{States: []State{{}}}
	for _, w := range words {
		s := 0
		for _, r := range w {
			next := d.step(s, r)
			if next < 0 {
				next = len(d.States)
				d.States = append(d.States, State{})
				d.States[s].Edges = append(d.States[s].Edges, Edge{Lo: r, Hi: r, To: next})
				slices.SortFunc(d.States[s].Edges, func(a, b Edge) int { return int(a.Lo - b.Lo) })
			}
			s = next
		}
		d.States[s].Accept = true
	}
	return d
}

// Lengths returns the DFA of the strings of min to max code points (max < 0: no bound).
func Lengths(min, max int) (*DFA, error) {
	n := min + 1
	if max >= 0 {
		n = max + 1
	}
	if n > MaxStates {
		return nil, ErrTooLarge
	}
	d := &DFA{States: make([]State, n)}
	for i := range n {
		d.States[i].Accept = i >= min
		to := i + 1
		if to == n {
			if max >= 0 {
				break
			}
			to = i
		}
		for _, u := range universe {
			d.States[i].Edges = append(d.States[i].Edges, Edge{Lo: u.Lo, Hi: u.Hi, To: to})
		}
	}
	return d, nil
}

// step follows r from state s, or returns -1 (the dead state).
func (d *DFA) step(s int, r rune) int {
	if s < 0 {
		return -1
	}
	edges := d.States[s].Edges
	i := sort.Search(len(edges), func(i int) bool { return edges[i].Hi >= r })
	if i < len(edges) && edges[i].Lo <= r {
		return edges[i].To
	}
	return -1
}

// Match reports whether d accepts s.
func (d *DFA) Match(s string) bool {
	st := 0
	for _, r := range s {
		if st = d.step(st, r); st < 0 {
			return false
		}
	}
	return d.States[st].Accept
}

// nfa is a Thompson automaton: epsilon edges and code point edges.
type nfa struct {
	eps   [][]int
	edges [][]nfaEdge
	rules map[string]grammar.Expr
	depth int
}

type nfaEdge struct {
	ranges []grammar.RuneRange
	to     int
}

func (n *nfa) state() (int, error) {
	if len(n.eps) >= 4*MaxStates {
		return 0, ErrTooLarge
	}
	n.eps = append(n.eps, nil)
	n.edges = append(n.edges, nil)
	return len(n.eps) - 1, nil
}

// build adds the states of e after state from and returns the state it ends in.
func (n *nfa) build(e grammar.Expr, from int) (int, error) {
	switch e := e.(type) {
	case *grammar.Literal:
		s := from
		for _, r := range e.Text {
			t, err := n.state()
			if err != nil {
				return 0, err
			}
			n.edges[s] = append(n.edges[s], nfaEdge{ranges: []grammar.RuneRange{{Lo: r, Hi: r}}, to: t})
			s = t
		}
		return s, nil
	case *grammar.Class:
		t, err := n.state()
		if err != nil {
			return 0, err
		}
		n.edges[from] = append(n.edges[from], nfaEdge{ranges: classRanges(e), to: t})
		return t, nil
	case *grammar.Seq:
		s := from
		for _, it := range e.Items {
			var err error
			if s, err = n.build(it, s); err != nil {
				return 0, err
			}
		}
		return s, nil
	case *grammar.Alt:
		end, err := n.state()
		if err != nil {
			return 0, err
		}
		for _, a := range e.Alts {
			start, err := n.state()
			if err != nil {
				return 0, err
			}
			n.eps[from] = append(n.eps[from], start)
			s, err := n.build(a, start)
			if err != nil {
				return 0, err
			}
			n.eps[s] = append(n.eps[s], end)
		}
		return end, nil
	case *grammar.Ref:
		body, ok := n.rules[e.Name]
		if !ok {
			return 0, fmt.Errorf("rule %s is not defined", e.Name)
		}
		if n.depth++; n.depth > 100 {
			return 0, fmt.Errorf("rule %s refers to itself", e.Name)
		}
		defer func() { n.depth-- }()
		return n.build(body, from)
	case *grammar.Repeat:
		s := from
		for range e.Min {
			var err error
			if s, err = n.build(e.Expr, s); err != nil {
				return 0, err
			}
		}
		if e.Max < 0 {
			loop, err := n.state()
			if err != nil {
				return 0, err
			}
			n.eps[s] = append(n.eps[s], loop)
			end, err := n.build(e.Expr, loop)
			if err != nil {
				return 0, err
			}
			n.eps[end] = append(n.eps[end], loop)
			return loop, nil
		}
		end, err := n.state()
		if err != nil {
			return 0, err
		}
		for range e.Max - e.Min {
			n.eps[s] = append(n.eps[s], end)
			if s, err = n.build(e.Expr, s); err != nil {
				return 0, err
			}
		}
		n.eps[s] = append(n.eps[s], end)
		return end, nil
	}
	return 0, fmt.Errorf("%T in a regular expression", e)
}

// classRanges are the code points of a class, sorted and disjoint, surrogates excluded.
func classRanges(c *grammar.Class) []grammar.RuneRange {
	rs := normalize(c.Ranges)
	if c.Negated {
		rs = complementRanges(rs)
	}
	return intersectRanges(rs, universe)
}

func normalize(in []grammar.RuneRange) []grammar.RuneRange {
	rs := slices.Clone(in)
	slices.SortFunc(rs, func(a, b grammar.RuneRange) int { return int(a.Lo - b.Lo) })
	var out []grammar.RuneRange
	for _, r := range rs {
		if n := len(out); n > 0 && r.Lo <= out[n-1].Hi+1 {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

func complementRanges(rs []grammar.RuneRange) []grammar.RuneRange {
	var out []grammar.RuneRange
	next := rune(0)
	for _, r := range rs {
		if r.Lo > next {
			out = append(out, grammar.RuneRange{Lo: next, Hi: r.Lo - 1})
		}
		next = r.Hi + 1
	}
	if next <= maxRune {
		out = append(out, grammar.RuneRange{Lo: next, Hi: maxRune})
	}
	return out
}

func intersectRanges(a, b []grammar.RuneRange) []grammar.RuneRange {
	var out []grammar.RuneRange
	for _, x := range a {
		for _, y := range b {
			lo, hi := max(x.Lo, y.Lo), min(x.Hi, y.Hi)
			if lo <= hi {
				out = append(out, grammar.RuneRange{Lo: lo, Hi: hi})
			}
		}
	}
	return out
}

// DFAOfExpr returns the DFA of a grammar expression without references (as Parse returns).
func DFAOfExpr(e grammar.Expr) (*DFA, error) {
	return DFAOfRules(e, nil)
}

// DFAOfRules returns the DFA of a grammar expression whose references name rules of a
// regular grammar (no rule refers back to itself, directly or not); rules gives their bodies.
func DFAOfRules(e grammar.Expr, rules map[string]grammar.Expr) (*DFA, error) {
	n := &nfa{rules: rules}
	start, _ := n.state()
	end, err := n.build(e, start)
	if err != nil {
		return nil, err
	}
	mark := make([]int, len(n.eps))
	gen := 0
	var stack []int
	closure := func(set []int) []int {
		gen++
		var out []int
		stack = stack[:0]
		for _, s := range set {
			if mark[s] != gen {
				mark[s] = gen
				stack = append(stack, s)
				out = append(out, s)
			}
		}
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, t := range n.eps[s] {
				if mark[t] != gen {
					mark[t] = gen
					stack = append(stack, t)
					out = append(out, t)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	key := func(set []int) string { return string(encodeInts(nil, set)) }
	d := &DFA{}
	index := map[string]int{}
	var sets [][]int
	add := func(set []int) (int, error) {
		k := key(set)
		if i, ok := index[k]; ok {
			return i, nil
		}
		if len(d.States) >= MaxStates {
			return 0, ErrTooLarge
		}
		index[k] = len(d.States)
		d.States = append(d.States, State{Accept: slices.Contains(set, end)})
		sets = append(sets, set)
		return len(d.States) - 1, nil
	}
	if _, err := add(closure([]int{start})); err != nil {
		return nil, err
	}
	for i := 0; i < len(sets); i++ {
		var parts [][]grammar.RuneRange
		var targets []int
		for _, s := range sets[i] {
			for _, e := range n.edges[s] {
				parts = append(parts, e.ranges)
				targets = append(targets, e.to)
			}
		}
		var edges []Edge
		for _, iv := range split(parts) {
			var next []int
			for _, p := range iv.parts {
				next = append(next, targets[p])
			}
			to, err := add(closure(next))
			if err != nil {
				return nil, err
			}
			edges = appendEdge(edges, Edge{Lo: iv.lo, Hi: iv.hi, To: to})
		}
		d.States[i].Edges = edges
	}
	return d.minimize(), nil
}

// appendEdge appends e, merged with the last edge when they are adjacent with one target.
func appendEdge(edges []Edge, e Edge) []Edge {
	if n := len(edges); n > 0 && edges[n-1].To == e.To && edges[n-1].Hi+1 == e.Lo {
		edges[n-1].Hi = e.Hi
		return edges
	}
	return append(edges, e)
}

// interval is an elementary interval of code points and the parts (indexes) that hold it.
type interval struct {
	lo, hi rune
	parts  []int
}

// split cuts the union of the parts' ranges into intervals on which the same parts hold.
func split(parts [][]grammar.RuneRange) []interval {
	var cuts []rune
	for _, p := range parts {
		for _, r := range p {
			cuts = append(cuts, r.Lo, r.Hi+1)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	if len(cuts) < 2 {
		return nil
	}
	holders := make([][]int, len(cuts)-1)
	for pi, p := range parts {
		for _, r := range p {
			i, _ := slices.BinarySearch(cuts, r.Lo)
			for ; i < len(cuts)-1 && cuts[i] <= r.Hi; i++ {
				holders[i] = append(holders[i], pi)
			}
		}
	}
	var out []interval
	for i, h := range holders {
		if len(h) > 0 {
			out = append(out, interval{lo: cuts[i], hi: cuts[i+1] - 1, parts: h})
		}
	}
	return out
}

// Product runs the automata side by side: a state of the product is a tuple of their states
// (the dead state included), and accept says, from the set of automata that accept (bit i
// for automaton i), whether the product accepts. It is how intersection (all accept),
// difference (the first and not the second) and complement (none accepts) are built. States
// from which no accepting state can be reached are dropped; nil means the product accepts
// nothing.
func Product(ds []*DFA, accept func(set uint64) bool) (*DFA, error) {
	if len(ds) > 64 {
		return nil, errors.New("more than 64 automata in one product")
	}
	out := &DFA{}
	index := map[string]int{}
	var tuples [][]int
	var buf []byte
	add := func(t []int) (int, error) {
		buf = encodeInts(buf[:0], t)
		if i, ok := index[string(buf)]; ok {
			return i, nil
		}
		if len(out.States) >= MaxStates {
			return 0, ErrTooLarge
		}
		var set uint64
		for i, s := range t {
			if s >= 0 && ds[i].States[s].Accept {
				set |= 1 << i
			}
		}
		index[string(buf)] = len(out.States)
		out.States = append(out.States, State{Accept: accept(set)})
		tuples = append(tuples, slices.Clone(t))
		return len(out.States) - 1, nil
	}
	if _, err := add(make([]int, len(ds))); err != nil {
		return nil, err
	}
	var cuts []rune
	pos := make([]int, len(ds))
	next := make([]int, len(ds))
	for i := 0; i < len(tuples); i++ {
		// Every code point moves the tuple (one no automaton reads leads to the all-dead
		// tuple): cut the alphabet where any automaton's edges begin or end, and sweep.
		cuts = cuts[:0]
		for _, u := range universe {
			cuts = append(cuts, u.Lo, u.Hi+1)
		}
		for k, s := range tuples[i] {
			if s < 0 {
				continue
			}
			for _, e := range ds[k].States[s].Edges {
				cuts = append(cuts, e.Lo, e.Hi+1)
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		clear(pos)
		var edges []Edge
		for j := 0; j+1 < len(cuts); j++ {
			lo, hi := cuts[j], cuts[j+1]-1
			if lo >= 0xD800 && hi <= 0xDFFF {
				continue
			}
			for k, s := range tuples[i] {
				next[k] = -1
				if s < 0 {
					continue
				}
				es := ds[k].States[s].Edges
				for pos[k] < len(es) && es[pos[k]].Hi < lo {
					pos[k]++
				}
				if pos[k] < len(es) && es[pos[k]].Lo <= lo {
					next[k] = es[pos[k]].To
				}
			}
			to, err := add(next)
			if err != nil {
				return nil, err
			}
			edges = appendEdge(edges, Edge{Lo: lo, Hi: hi, To: to})
		}
		out.States[i].Edges = edges
	}
	return out.trim(), nil
}

// encodeInts appends the ints of t to buf, four bytes each.
func encodeInts(buf []byte, t []int) []byte {
	for _, v := range t {
		buf = append(buf, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return buf
}

// trim drops the states from which no accepting state is reached; nil when the start is one.
func (d *DFA) trim() *DFA {
	live := make([]bool, len(d.States))
	for changed := true; changed; {
		changed = false
		for i, s := range d.States {
			if live[i] {
				continue
			}
			if s.Accept {
				live[i], changed = true, true
				continue
			}
			for _, e := range s.Edges {
				if live[e.To] {
					live[i], changed = true, true
					break
				}
			}
		}
	}
	if !live[0] {
		return nil
	}
	renum := make([]int, len(d.States))
	out := &DFA{}
	for i := range d.States {
		renum[i] = -1
		if live[i] {
			renum[i] = len(out.States)
			out.States = append(out.States, State{Accept: d.States[i].Accept})
		}
	}
	for i, s := range d.States {
		if !live[i] {
			continue
		}
		var edges []Edge
		for _, e := range s.Edges {
			if live[e.To] {
				edges = appendEdge(edges, Edge{Lo: e.Lo, Hi: e.Hi, To: renum[e.To]})
			}
		}
		out.States[renum[i]].Edges = edges
	}
	return out.minimize()
}

// minimize merges the states that accept the same strings (Moore's partition refinement:
// states start split by acceptance and are split again by where their edges lead, until
// nothing splits). A name automaton's "a letter so far" and "letters so far" become one state
// that loops, which a token mask takes as a repetition.
func (d *DFA) minimize() *DFA {
	n := len(d.States)
	class := make([]int, n)
	classes := 1
	for i, s := range d.States {
		if s.Accept != d.States[0].Accept {
			class[i], classes = 1, 2
		}
	}
	var buf []byte
	var merged []Edge
	for {
		sigs := map[string]int{}
		next := make([]int, n)
		for i, s := range d.States {
			merged = merged[:0]
			for _, e := range s.Edges {
				merged = appendEdge(merged, Edge{Lo: e.Lo, Hi: e.Hi, To: class[e.To]})
			}
			buf = encodeInts(buf[:0], []int{class[i]})
			for _, e := range merged {
				buf = encodeInts(buf, []int{int(e.Lo), int(e.Hi), e.To})
			}
			id, ok := sigs[string(buf)]
			if !ok {
				id = len(sigs)
				sigs[string(buf)] = id
			}
			next[i] = id
		}
		class = next
		if len(sigs) == classes {
			break
		}
		classes = len(sigs)
	}
	if classes == n {
		return d
	}
	out := &DFA{States: make([]State, classes)}
	done := make([]bool, classes)
	for i, s := range d.States {
		c := class[i]
		if done[c] {
			continue
		}
		done[c] = true
		var edges []Edge
		for _, e := range s.Edges {
			edges = appendEdge(edges, Edge{Lo: e.Lo, Hi: e.Hi, To: class[e.To]})
		}
		out.States[c] = State{Accept: s.Accept, Edges: edges}
	}
	return out
}

// Intersect returns the DFA of the strings every automaton accepts (nil: none).
func Intersect(ds ...*DFA) (*DFA, error) {
	all := uint64(1)<<len(ds) - 1
	return Product(ds, func(set uint64) bool { return set == all })
}

// Minus returns the DFA of the strings a accepts and b does not (nil: none).
func Minus(a, b *DFA) (*DFA, error) {
	return Product([]*DFA{a, b}, func(set uint64) bool { return set == 1 })
}

// Complement returns the DFA of the strings d does not accept (nil: none).
func Complement(d *DFA) (*DFA, error) {
	return Product([]*DFA{d}, func(set uint64) bool { return set == 0 })
}

// Grammar returns the rules of a trimmed DFA, one per state, named prefix and the state's
// number, each a choice of a code point class followed by the next state's rule (and the
// empty string where the state accepts); the language is that of the first rule. A large
// class that several states read is a rule of its own (prefix, "c" and a number), so that
// it is compiled once. A state that loops on a class is written as that class repeated, then
// the choice of its other edges: class* (ε | c1 s1 | …), the same language as the
// right-recursive form (the DFA is deterministic, so the loop's class and the others are
// disjoint), and a repetition is what a constraint's token mask takes whole vocabulary slices
// for — a name automaton's "any other name" state costs a mask what a plain string does.
func (d *DFA) Grammar(prefix string) []grammar.Rule {
	name := func(i int) string { return prefix + strconv.Itoa(i) }
	type class struct {
		ranges []grammar.RuneRange
		uses   int
	}
	var classes []*class
	byKey := map[string]*class{}
	perState := make([][]*class, len(d.States))
	targets := make([][]int, len(d.States))
	for i, s := range d.States {
		byTarget := map[int][]grammar.RuneRange{}
		for _, e := range s.Edges {
			if _, ok := byTarget[e.To]; !ok {
				targets[i] = append(targets[i], e.To)
			}
			byTarget[e.To] = append(byTarget[e.To], grammar.RuneRange{Lo: e.Lo, Hi: e.Hi})
		}
		for _, t := range targets[i] {
			rs := byTarget[t]
			var key []byte
			for _, r := range rs {
				key = encodeInts(key, []int{int(r.Lo), int(r.Hi)})
			}
			c, ok := byKey[string(key)]
			if !ok {
				c = &class{ranges: rs}
				byKey[string(key)] = c
				classes = append(classes, c)
			}
			c.uses++
			perState[i] = append(perState[i], c)
		}
	}
	rules := make([]grammar.Rule, len(d.States))
	shared := map[*class]string{}
	for _, c := range classes {
		if c.uses > 1 && len(c.ranges) > 4 {
			shared[c] = prefix + "c" + strconv.Itoa(len(shared))
			rules = append(rules, grammar.Rule{Name: shared[c], Body: &grammar.Class{Ranges: c.ranges}})
		}
	}
	for i, s := range d.States {
		var alts []grammar.Expr
		if s.Accept {
			alts = append(alts, &grammar.Seq{})
		}
		var loop grammar.Expr
		for j, t := range targets[i] {
			c := perState[i][j]
			var item grammar.Expr = &grammar.Class{Ranges: c.ranges}
			if n, ok := shared[c]; ok {
				item = &grammar.Ref{Name: n}
			}
			if t == i {
				loop = item
				continue
			}
			alts = append(alts, &grammar.Seq{Items: []grammar.Expr{item, &grammar.Ref{Name: name(t)}}})
		}
		var body grammar.Expr = &grammar.Alt{Alts: alts}
		if len(alts) == 1 {
			body = alts[0]
		}
		if loop != nil {
			body = &grammar.Seq{Items: []grammar.Expr{&grammar.Repeat{Expr: loop, Min: 0, Max: -1}, body}}
		}
		rules[i] = grammar.Rule{Name: name(i), Body: body}
	}
	return rules
}
