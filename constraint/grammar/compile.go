package grammar

import "fmt"

// Compile turns g into a byte-level CFG whose start symbol is the rule named start. Character
// classes become byte sets (one per UTF-8 length and range), x* becomes a left-recursive helper
// rule (R ::= ε | R x, which an Earley parser recognises in constant work per byte), and
// bounded repetitions are unrolled. It fails, naming line and column, on a reference to an
// undefined rule and on a rule reachable from start that derives no finite string (such as
// r ::= r "a", or a start rule that can never finish: a grammar that accepts nothing).
func Compile(g *Grammar, start string) (*CFG, error) {
	c := &compiler{cfg: &CFG{}, ids: map[string]int32{}, terms: map[ByteSet]int{}}
	for _, r := range g.Rules {
		c.ids[r.Name] = c.newNT(r.Name)
		c.pos = append(c.pos, r.Pos)
	}
	id, ok := c.ids[start]
	if !ok {
		return nil, fmt.Errorf("grammar has no rule named %q (the start rule)", start)
	}
	c.cfg.Start = id
	for _, r := range g.Rules {
		c.rule = r.Name
		if err := c.alternatives(c.ids[r.Name], r.Body); err != nil {
			return nil, err
		}
	}
	if err := c.prune(g); err != nil {
		return nil, err
	}
	c.cfg.ByLHS = make([][]int32, len(c.cfg.Names))
	for i, p := range c.cfg.Prods {
		c.cfg.ByLHS[p.LHS] = append(c.cfg.ByLHS[p.LHS], int32(i))
	}
	c.nullable()
	if len(g.RegularGroups) > 0 {
		if err := c.prefixes(g); err != nil {
			return nil, err
		}
	}
	return c.cfg, nil
}

// prefixes gives the entry rule of each of g's regular groups its prefix automaton (built on
// first use). Only the entry: inside, the automaton's loops are repetitions with slices of
// their own, and a slice per state would cost a pass over the vocabulary each. A group naming
// a rule the grammar does not have is an error; a group that breaks NewPrefixGroup's
// conditions just gets no automaton.
func (c *compiler) prefixes(g *Grammar) error {
	bodies := make(map[string]Expr, len(g.Rules))
	for _, r := range g.Rules {
		bodies[r.Name] = r.Body
	}
	nts := make(map[string]int32, len(c.cfg.Names))
	for i, n := range c.cfg.Names {
		nts[n] = int32(i)
	}
	c.cfg.Prefixes = map[int32]*PrefixAutomaton{}
	for gi, group := range g.RegularGroups {
		var rules []Rule
		for _, name := range group {
			body, ok := bodies[name]
			if !ok {
				return fmt.Errorf("regular group %d: no rule %q in the grammar", gi, name)
			}
			rules = append(rules, Rule{Name: name, Body: body})
		}
		if len(rules) == 0 {
			continue
		}
		if nt, ok := nts[rules[0].Name]; ok { // pruned when unreachable
			c.cfg.Prefixes[nt] = NewPrefixGroup(rules, bodies)[0]
		}
	}
	return nil
}

// MustCompile parses and compiles src with start rule "root" and panics on error; for tests
// and examples with grammars known to be valid.
func MustCompile(src string) *CFG {
	g, err := Parse(src)
	if err != nil {
		panic(err)
	}
	cfg, err := Compile(g, "root")
	if err != nil {
		panic(err)
	}
	return cfg
}

type compiler struct {
	cfg   *CFG
	ids   map[string]int32
	pos   []Pos // positions of the source rules (the first nonterminals)
	terms map[ByteSet]int
	rule  string // the source rule being compiled, for helper names
	count int
	// classes holds the rule of each state of the classes' UTF-8 automata compiled so far:
	// every occurrence of a class (and every class sharing a state with it, such as the
	// continuation bytes) uses the same rules.
	classes map[*utf8Node]int32
}

func (c *compiler) newNT(name string) int32 {
	c.cfg.Names = append(c.cfg.Names, name)
	return int32(len(c.cfg.Names) - 1)
}

func (c *compiler) helper(kind string) int32 {
	c.count++
	return c.newNT(fmt.Sprintf("%s/%s%d", c.rule, kind, c.count))
}

func (c *compiler) prod(lhs int32, rhs []Symbol) {
	c.cfg.Prods = append(c.cfg.Prods, Production{LHS: lhs, RHS: rhs})
}

func (c *compiler) terminal(s ByteSet) Symbol {
	t, ok := c.terms[s]
	if !ok {
		t = len(c.cfg.Terminals)
		c.cfg.Terminals = append(c.cfg.Terminals, s)
		c.terms[s] = t
	}
	return Symbol(-t - 1)
}

func (c *compiler) alternatives(nt int32, e Expr) error {
	if a, ok := e.(*Alt); ok {
		for _, alt := range a.Alts {
			rhs, err := c.sequence(nil, alt)
			if err != nil {
				return err
			}
			c.prod(nt, rhs)
		}
		return nil
	}
	rhs, err := c.sequence(nil, e)
	if err != nil {
		return err
	}
	c.prod(nt, rhs)
	return nil
}

// sequence appends the symbols of e to out.
func (c *compiler) sequence(out []Symbol, e Expr) ([]Symbol, error) {
	switch e := e.(type) {
	case *Seq:
		for _, it := range e.Items {
			var err error
			if out, err = c.sequence(out, it); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *Literal:
		for i := 0; i < len(e.Text); i++ {
			var s ByteSet
			s.Add(e.Text[i], e.Text[i])
			out = append(out, c.terminal(s))
		}
		return out, nil
	case *Class:
		return append(out, c.class(e)), nil
	case *Ref:
		id, ok := c.ids[e.Name]
		if !ok {
			return nil, &Error{e.Pos, fmt.Sprintf("rule %q is not defined", e.Name)}
		}
		return append(out, Symbol(id)), nil
	case *Alt:
		nt := c.helper("alt")
		if err := c.alternatives(nt, e); err != nil {
			return nil, err
		}
		return append(out, Symbol(nt)), nil
	case *Repeat:
		return c.repeat(out, e)
	}
	return nil, fmt.Errorf("grammar: unknown expression %T", e)
}

// unit returns a single symbol that matches e.
func (c *compiler) unit(e Expr) (Symbol, error) {
	rhs, err := c.sequence(nil, e)
	if err != nil {
		return 0, err
	}
	if len(rhs) == 1 {
		return rhs[0], nil
	}
	nt := c.helper("group")
	c.prod(nt, rhs)
	return Symbol(nt), nil
}

func (c *compiler) repeat(out []Symbol, r *Repeat) ([]Symbol, error) {
	x, err := c.unit(r.Expr)
	if err != nil {
		return nil, err
	}
	for range r.Min {
		out = append(out, x)
	}
	switch {
	case r.Max < 0:
		star := c.helper("star")
		c.prod(star, nil)
		c.prod(star, []Symbol{Symbol(star), x})
		out = append(out, Symbol(star))
	case r.Max > r.Min:
		// opt_k ::= ε | x opt_{k-1}: at most k more copies of x.
		var prev int32 = -1
		for range r.Max - r.Min {
			opt := c.helper("opt")
			c.prod(opt, nil)
			if prev < 0 {
				c.prod(opt, []Symbol{x})
			} else {
				c.prod(opt, []Symbol{x, Symbol(prev)})
			}
			prev = opt
		}
		out = append(out, Symbol(prev))
	}
	return out, nil
}

// class returns a symbol matching one code point of cls: a single terminal when every code
// point is one byte long, else a helper rule per state of the class's UTF-8 automaton
// (utf8Automaton), each with a production per edge: a terminal, then the next state's rule
// (the rules of a state are made once per grammar).
func (c *compiler) class(cls *Class) Symbol {
	root := utf8Automaton(runeSet(cls))
	switch {
	case len(root.edges) == 0:
		return c.terminal(ByteSet{})
	case len(root.edges) == 1 && root.edges[0].next == nil:
		return c.terminal(byteSet(root.edges[0].ranges))
	}
	if c.classes == nil {
		c.classes = map[*utf8Node]int32{}
	}
	var rule func(n *utf8Node) int32
	rule = func(n *utf8Node) int32 {
		if nt, ok := c.classes[n]; ok {
			return nt
		}
		nt := c.helper("class")
		c.classes[n] = nt
		for _, e := range n.edges {
			t := c.terminal(byteSet(e.ranges))
			if e.next == nil {
				c.prod(nt, []Symbol{t})
			} else {
				c.prod(nt, []Symbol{t, Symbol(rule(e.next))})
			}
		}
		return nt
	}
	return Symbol(rule(root))
}

// runeSet returns the code points cls matches as sorted, disjoint ranges.
func runeSet(cls *Class) []RuneRange {
	rs := append([]RuneRange(nil), cls.Ranges...)
	sortRanges(rs)
	var merged []RuneRange
	for _, r := range rs {
		if n := len(merged); n > 0 && r.Lo <= merged[n-1].Hi+1 {
			merged[n-1].Hi = max(merged[n-1].Hi, r.Hi)
			continue
		}
		merged = append(merged, r)
	}
	if !cls.Negated {
		return merged
	}
	var out []RuneRange
	next := rune(0)
	for _, r := range merged {
		if r.Lo > next {
			out = append(out, RuneRange{next, r.Lo - 1})
		}
		next = r.Hi + 1
	}
	if next <= 0x10FFFF {
		out = append(out, RuneRange{next, 0x10FFFF})
	}
	return out
}

func sortRanges(rs []RuneRange) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Lo < rs[j-1].Lo; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}
