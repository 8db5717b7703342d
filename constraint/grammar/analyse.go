package grammar

import "fmt"

// prune removes the productions that use a nonterminal deriving no finite string, and fails
// if such a nonterminal is a source rule reachable from the start rule.
func (c *compiler) prune(g *Grammar) error {
	cfg := c.cfg
	productive := make([]bool, len(cfg.Names))
	ok := func(s Symbol) bool {
		if s.IsTerminal() {
			return !cfg.Terminals[s.Terminal()].Empty()
		}
		return productive[s]
	}
	for changed := true; changed; {
		changed = false
		for _, p := range cfg.Prods {
			if productive[p.LHS] {
				continue
			}
			all := true
			for _, s := range p.RHS {
				if !ok(s) {
					all = false
					break
				}
			}
			if all {
				productive[p.LHS] = true
				changed = true
			}
		}
	}
	// Report the first reachable source rule that is not productive, in source order.
	reach := c.reachable()
	for i, r := range g.Rules {
		if reach[i] && !productive[i] {
			if int32(i) == cfg.Start {
				return &Error{r.Pos, fmt.Sprintf("rule %q derives no finite string: the grammar accepts nothing", r.Name)}
			}
			return &Error{r.Pos, fmt.Sprintf("rule %q derives no finite string (every alternative recurses or needs an empty character class)", r.Name)}
		}
	}
	kept := cfg.Prods[:0]
	for _, p := range cfg.Prods {
		all := productive[p.LHS]
		for _, s := range p.RHS {
			all = all && ok(s)
		}
		if all {
			kept = append(kept, p)
		}
	}
	cfg.Prods = kept
	return nil
}

// reachable marks the nonterminals reachable from the start symbol.
func (c *compiler) reachable() []bool {
	cfg := c.cfg
	by := make([][]int, len(cfg.Names))
	for i, p := range cfg.Prods {
		by[p.LHS] = append(by[p.LHS], i)
	}
	seen := make([]bool, len(cfg.Names))
	stack := []int32{cfg.Start}
	seen[cfg.Start] = true
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, pi := range by[n] {
			for _, s := range cfg.Prods[pi].RHS {
				if !s.IsTerminal() && !seen[s] {
					seen[s] = true
					stack = append(stack, int32(s))
				}
			}
		}
	}
	return seen
}

// nullable computes CFG.Nullable.
func (c *compiler) nullable() {
	cfg := c.cfg
	cfg.Nullable = make([]bool, len(cfg.Names))
	for changed := true; changed; {
		changed = false
		for _, p := range cfg.Prods {
			if cfg.Nullable[p.LHS] {
				continue
			}
			all := true
			for _, s := range p.RHS {
				if s.IsTerminal() || !cfg.Nullable[s] {
					all = false
					break
				}
			}
			if all {
				cfg.Nullable[p.LHS] = true
				changed = true
			}
		}
	}
}
