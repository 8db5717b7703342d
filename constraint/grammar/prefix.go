package grammar

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/loomlm/loom/constraint/internal/digest"
)

// Prefix automata. A group of rules whose references to each other are all in tail position
// (the rules of a regular expression's automaton, one per state: a choice of a class followed
// by the next state's rule) derives a regular language from each of its rules. A group's
// prefix automaton is a byte automaton whose live states are exactly the prefixes of each
// rule's strings: a parser about to read one of these rules accepts every byte string the
// automaton keeps alive from that rule's start, so a token mask takes all such tokens at once
// (a vocabulary slice). The automaton is derived from the same expressions, UTF-8 sequences
// and literals as the compiled grammar, so it accepts exactly the bytes the parser accepts
// there. Groups are cached by content: a schema compiled again, or another with the same
// pattern, shares its automaton (and the slices a parser keeps with it).

// maxPrefixStates bounds a prefix automaton's states; past it the group has none.
const maxPrefixStates = 4096

// maxCachedPrefixGroups bounds the cache of groups; past it, it starts over.
const maxCachedPrefixGroups = 1024

// PrefixAutomaton is the prefix automaton of one rule of a group (see NewPrefixGroup).
type PrefixAutomaton struct {
	group *prefixGroup
	index int // of the rule in its group
}

// DFA returns the group's automaton: trans[(s-1)*256+b] is the state after byte b from state
// s (0: b cannot follow), start is the rule's start state and key identifies the automaton
// (equal keys, equal transitions). ok is false when the group has no automaton. The slice
// trans is shared by every rule of the group and every compile of the same group.
func (p *PrefixAutomaton) DFA() (trans []uint16, start uint32, key string, ok bool) {
	g := p.group
	g.once.Do(g.build)
	if g.trans == nil {
		return nil, 0, "", false
	}
	return g.trans, g.starts[p.index], g.key, true
}

var prefixGroups struct {
	sync.Mutex
	byContent map[string]*prefixGroup
}

// NewPrefixGroup returns the prefix automata of rules, in their order (built on first use).
// References to a rule of the group must be in tail position; references to other rules
// (bodies in other) are expanded in place and must not lead back into a rule being expanded.
// A group that breaks these conditions, or whose automaton passes maxPrefixStates states, has
// no automaton (DFA reports false), which costs a parser nothing but the slices.
//
// The rules and the bodies the group expands are taken when NewPrefixGroup is called (the
// automaton is built later, from copies of the slice and map), so the caller may replace rules
// and map entries afterwards, but not change the Expr values in place (they are shared, as
// Parse's are); rules with the same name twice, and rules that reach a recursive rule of
// other, make a group with no automaton.
func NewPrefixGroup(rules []Rule, other map[string]Expr) []*PrefixAutomaton {
	key, used, ok := groupKey(rules, other)
	var g *prefixGroup
	if ok {
		prefixGroups.Lock()
		g = prefixGroups.byContent[key]
		if g == nil {
			if prefixGroups.byContent == nil || len(prefixGroups.byContent) >= maxCachedPrefixGroups {
				prefixGroups.byContent = map[string]*prefixGroup{}
			}
			g = &prefixGroup{rules: slices.Clone(rules), other: used}
			prefixGroups.byContent[key] = g
		}
		prefixGroups.Unlock()
	} else {
		g = &prefixGroup{} // no automaton
		g.once.Do(func() {})
	}
	out := make([]*PrefixAutomaton, len(rules))
	for i := range rules {
		out[i] = &PrefixAutomaton{group: g, index: i}
	}
	return out
}

// groupKey writes rules' bodies with references to the group's rules as their indices and
// other references expanded (memoised per name), so that groups with the same strings get the
// same key whatever their rules are called; used are the bodies of other it expanded. ok is
// false for a reference to an unknown rule or a name given twice.
func groupKey(rules []Rule, other map[string]Expr) (string, map[string]Expr, bool) {
	index := make(map[string]int, len(rules))
	for i, r := range rules {
		if _, dup := index[r.Name]; dup {
			return "", nil, false
		}
		index[r.Name] = i
	}
	used := map[string]Expr{}
	expanded := map[string]string{}
	expanding := map[string]bool{} // other rules being written: met again, they recurse
	var b strings.Builder
	ok := true
	var write func(e Expr, depth int)
	write = func(e Expr, depth int) {
		if !ok {
			return
		}
		switch e := e.(type) {
		case *Alt:
			b.WriteString("(|")
			for _, a := range e.Alts {
				write(a, depth)
				b.WriteByte('|')
			}
			b.WriteByte(')')
		case *Seq:
			b.WriteString("(")
			for _, a := range e.Items {
				write(a, depth)
				b.WriteByte(' ')
			}
			b.WriteByte(')')
		case *Literal:
			fmt.Fprintf(&b, "%q", e.Text)
		case *Class:
			fmt.Fprintf(&b, "[%v%v]", e.Negated, e.Ranges)
		case *Repeat:
			fmt.Fprintf(&b, "{%d,%d:", e.Min, e.Max)
			write(e.Expr, depth)
			b.WriteByte('}')
		case *Ref:
			if i, in := index[e.Name]; in {
				fmt.Fprintf(&b, "#%d", i)
				return
			}
			if s, done := expanded[e.Name]; done {
				b.WriteString(s)
				return
			}
			body, known := other[e.Name]
			if !known || expanding[e.Name] || depth > 32 {
				ok = false // unknown, recursive (not regular) or too deep
				return
			}
			used[e.Name] = body
			expanding[e.Name] = true
			start := b.Len()
			write(body, depth+1)
			expanding[e.Name] = false
			expanded[e.Name] = b.String()[start:]
		default:
			ok = false
		}
	}
	for _, r := range rules {
		write(r.Body, 0)
		b.WriteByte(';')
	}
	return b.String(), used, ok
}

type prefixGroup struct {
	rules []Rule
	other map[string]Expr

	once   sync.Once
	trans  []uint16
	starts []uint32
	key    string
}

// prefixNFA is a byte NFA under construction: ε-moves and byte-range moves between states.
type prefixNFA struct {
	eps    [][]int
	moves  [][]prefixMove
	entry  map[string]int // the entry state of each rule of the group
	other  map[string]Expr
	final  int      // the end of every rule's strings
	inline []string // rules outside the group being expanded (to refuse recursion)
	failed bool
}

type prefixMove struct {
	lo, hi byte
	to     int
}

func (n *prefixNFA) state() int {
	n.eps = append(n.eps, nil)
	n.moves = append(n.moves, nil)
	return len(n.eps) - 1
}

// build adds e from state from and returns the state after it; tail says e is the last thing
// its rule matches (a reference to a group rule is then a jump to that rule).
func (n *prefixNFA) build(e Expr, from int, tail bool) int {
	if n.failed {
		return from
	}
	switch e := e.(type) {
	case *Alt:
		end := n.state()
		for _, a := range e.Alts {
			to := n.build(a, from, tail)
			n.eps[to] = append(n.eps[to], end)
		}
		return end
	case *Seq:
		cur := from
		for i, it := range e.Items {
			cur = n.build(it, cur, tail && i == len(e.Items)-1)
		}
		return cur
	case *Literal:
		cur := from
		for i := 0; i < len(e.Text); i++ {
			next := n.state()
			n.moves[cur] = append(n.moves[cur], prefixMove{e.Text[i], e.Text[i], next})
			cur = next
		}
		return cur
	case *Class:
		// The class's UTF-8 automaton, its root at from and its ends at end.
		end := n.state()
		states := map[*utf8Node]int{}
		var walk func(u *utf8Node, at int)
		walk = func(u *utf8Node, at int) {
			for _, ed := range u.edges {
				to := end
				if ed.next != nil {
					var seen bool
					if to, seen = states[ed.next]; !seen {
						to = n.state()
						states[ed.next] = to
						walk(ed.next, to)
					}
				}
				for _, br := range ed.ranges {
					n.moves[at] = append(n.moves[at], prefixMove{br.lo, br.hi, to})
				}
			}
		}
		walk(utf8Automaton(runeSet(e)), from)
		return end
	case *Repeat:
		if e.Min == 0 && e.Max == 1 { // optional: its body may end the rule
			end := n.state()
			n.eps[from] = append(n.eps[from], end)
			to := n.build(e.Expr, from, tail)
			n.eps[to] = append(n.eps[to], end)
			return end
		}
		if e.Max > 64 || e.Min > 64 {
			n.failed = true
			return from
		}
		cur := from
		for range e.Min {
			cur = n.build(e.Expr, cur, false)
		}
		if e.Max < 0 {
			loop := n.state()
			n.eps[cur] = append(n.eps[cur], loop)
			back := n.build(e.Expr, loop, false)
			n.eps[back] = append(n.eps[back], loop)
			return loop
		}
		end := n.state()
		n.eps[cur] = append(n.eps[cur], end)
		for range e.Max - e.Min {
			cur = n.build(e.Expr, cur, false)
			n.eps[cur] = append(n.eps[cur], end)
		}
		return end
	case *Ref:
		if entry, ok := n.entry[e.Name]; ok {
			if !tail {
				n.failed = true
				return from
			}
			n.eps[from] = append(n.eps[from], entry)
			return n.state() // nothing follows a jump: a state with no moves
		}
		body, ok := n.other[e.Name]
		if !ok || len(n.inline) > 32 || slices.Contains(n.inline, e.Name) {
			n.failed = true
			return from
		}
		n.inline = append(n.inline, e.Name)
		to := n.build(body, from, false)
		n.inline = n.inline[:len(n.inline)-1]
		return to
	}
	n.failed = true
	return from
}

func (g *prefixGroup) build() {
	n := &prefixNFA{entry: map[string]int{}, other: g.other}
	n.final = n.state()
	entries := make([]int, len(g.rules))
	for i, r := range g.rules {
		entries[i] = n.state()
		n.entry[r.Name] = entries[i]
	}
	for _, r := range g.rules {
		end := n.build(r.Body, n.entry[r.Name], true)
		n.eps[end] = append(n.eps[end], n.final)
	}
	g.rules, g.other = nil, nil          // not needed any more (the cache keeps g)
	if n.failed || len(n.eps) >= 1<<24 { // the subset keys below write a state in 3 bytes
		return
	}
	// Keep only the states from which the end can be reached: a live state of the automaton
	// must be a prefix of a string of the rule.
	back := make([][]int, len(n.eps))
	for s := range n.eps {
		for _, t := range n.eps[s] {
			back[t] = append(back[t], s)
		}
		for _, m := range n.moves[s] {
			back[m.to] = append(back[m.to], s)
		}
	}
	useful := make([]bool, len(n.eps))
	stack := []int{n.final}
	useful[n.final] = true
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range back[s] {
			if !useful[p] {
				useful[p] = true
				stack = append(stack, p)
			}
		}
	}
	mark := make([]int, len(n.eps))
	gen := 0
	var st, closed []int
	// closure returns the sorted ε-closure of set over useful states, in scratch storage
	// (add copies it when it is a new state).
	closure := func(set []int) []int {
		gen++
		closed = closed[:0]
		st = append(st[:0], set...)
		for len(st) > 0 {
			s := st[len(st)-1]
			st = st[:len(st)-1]
			if mark[s] == gen || !useful[s] {
				continue
			}
			mark[s] = gen
			closed = append(closed, s)
			st = append(st, n.eps[s]...)
		}
		slices.Sort(closed)
		return closed
	}
	// key writes a set's key (each state in 3 bytes) to keyBuf; a map lookup by
	// string(keyBuf) does not allocate, and only new keys are copied.
	var keyBuf []byte
	key := func(set []int) []byte {
		keyBuf = keyBuf[:0]
		for _, s := range set {
			keyBuf = append(keyBuf, byte(s), byte(s>>8), byte(s>>16))
		}
		return keyBuf
	}
	ids := map[string]uint16{}
	var sets [][]int
	add := func(set []int) (uint16, bool) {
		if len(set) == 0 {
			return 0, true
		}
		k := key(set)
		if id, ok := ids[string(k)]; ok {
			return id, true
		}
		if len(sets) == maxPrefixStates {
			return 0, false
		}
		sets = append(sets, slices.Clone(set))
		ids[string(k)] = uint16(len(sets))
		return uint16(len(sets)), true
	}
	starts := make([]uint32, len(entries))
	for i, entry := range entries {
		id, ok := add(closure([]int{entry}))
		if !ok {
			return
		}
		starts[i] = uint32(id)
	}
	var trans []uint16
	var next []int
	var cuts []int
	byMoves := map[string]uint16{} // bytes with the same moves go to the same state
	for q := 0; q < len(sets); q++ {
		// The table grows by doubling: append grows a large slice by a quarter, copying it
		// again and again (a third of a first build's time on groups of hundreds of states).
		if cap(trans)-len(trans) < 256 {
			trans = slices.Grow(trans, max(len(trans), 256*len(sets)-len(trans)))
		}
		row := trans[len(trans) : len(trans)+256]
		trans = trans[:len(trans)+256]
		// The moves out of the state change only where one of its byte ranges starts or
		// ends: between two cuts every byte has the same moves.
		cuts = append(cuts[:0], 0, 256)
		for _, s := range sets[q] {
			for _, m := range n.moves[s] {
				cuts = append(cuts, int(m.lo), int(m.hi)+1)
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		clear(byMoves)
		for i := 0; i+1 < len(cuts); i++ {
			lo, hi := cuts[i], cuts[i+1]
			next = next[:0]
			for _, s := range sets[q] {
				for _, m := range n.moves[s] {
					if int(m.lo) <= lo && lo <= int(m.hi) {
						next = append(next, m.to)
					}
				}
			}
			id, seen := byMoves[string(key(next))]
			if !seen {
				k := string(keyBuf) // add rewrites keyBuf
				var ok bool
				if id, ok = add(closure(next)); !ok {
					return
				}
				byMoves[k] = id
			}
			for b := lo; b < hi; b++ {
				row[b] = id
			}
		}
	}
	h := digest.New()
	h.Uint16s(trans)
	g.trans, g.starts, g.key = trans, starts, h.Key("prefix")
}
