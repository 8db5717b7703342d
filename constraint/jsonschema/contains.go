package jsonschema

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/loomlm/loom/constraint/grammar"
)

// MaxCountStates bounds the states of an array with contains: the items written so far (up to
// the largest of minItems, maxItems and the prefixItems) times the matching items counted (up
// to minContains, or maxContains when there is one).
const MaxCountStates = 2000

// count reads a non-negative integer keyword; -1 when it is absent.
func count(s *Object, kw, ptr string) (int, error) {
	v, ok := s.Get(kw)
	if !ok {
		return -1, nil
	}
	n, ok := v.(json.Number)
	f, err := n.Float64()
	if !ok || err != nil || f < 0 || f != math.Trunc(f) {
		return 0, errAt(ptr+"/"+kw, "must be a non-negative integer")
	}
	if f > grammar.MaxRepeat {
		return 0, errAt(ptr+"/"+kw, "%v is above the largest supported count %d", f, grammar.MaxRepeat)
	}
	return int(f), nil
}

// itemCounts reads an array schema's minItems (0 when absent) and maxItems (-1 when absent).
func itemCounts(s *Object, ptr string) (minN, maxN int, err error) {
	if minN, err = count(s, "minItems", ptr); err != nil {
		return 0, 0, err
	}
	if maxN, err = count(s, "maxItems", ptr); err != nil {
		return 0, 0, err
	}
	return max(minN, 0), maxN, nil
}

// moreContains is a keyword Decode never writes (see notStrings): the contains conditions of
// other allOf parts ({"contains", "minContains", "maxContains"} objects), each counted on
// its own, as the first is.
const moreContains = "\xffcontains"

// hiddenCond marks a condition of moreContains that evaluates nothing (a complement's): the
// items it matches are not evaluated for unevaluatedItems.
const hiddenCond = "\xffhidden"

// MaxContains bounds the contains conditions of one array (each subset of them is a kind of
// item).
const MaxContains = 3

// containsCond is one contains with its counts (maxC < 0: no bound).
type containsCond struct {
	schema     any
	minC, maxC int
	notSchema  []any // the complement of schema, where maxC bounds the count
}

// containsConds reads contains and the conditions of moreContains.
func (c *compiler) containsConds(s *Object, ptr string) ([]containsCond, error) {
	var objs []*Object
	if _, ok := s.Get("contains"); ok {
		objs = append(objs, s)
	}
	if more, ok := s.Values[moreContains].([]any); ok {
		for _, m := range more {
			objs = append(objs, m.(*Object))
		}
	}
	var out []containsCond
	for _, o := range objs {
		minC, err := count(o, "minContains", ptr)
		if err != nil {
			return nil, err
		}
		maxC, err := count(o, "maxContains", ptr)
		if err != nil {
			return nil, err
		}
		if minC < 0 {
			minC = 1
		}
		cc := containsCond{schema: o.Values["contains"], minC: minC, maxC: maxC}
		if maxC >= 0 {
			if cc.notSchema, err = c.complement(cc.schema, ptr+"/contains"); err != nil {
				return nil, err
			}
		}
		out = append(out, cc)
	}
	if len(out) > MaxContains {
		return nil, errAt(ptr, "more than %d contains conditions on one array are not supported", MaxContains)
	}
	return out, nil
}

// containsArray is an array under contains (with minContains, default 1, and maxContains, and
// the contains of other allOf parts): a walk over the items that counts, for each condition,
// the ones matching it. Each item is counted for a set of conditions, and must match their
// schemas; where a condition has no maxContains an item need not be counted even if it
// matches, which is exact (an array with enough matching items can be read so); where it
// has one, an item not counted must not match, so the complement of its contains must be
// expressible (see complement), or the schema is refused.
func (c *compiler) containsArray(s *Object, ptr string) (grammar.Expr, error) {
	minN, maxN, err := itemCounts(s, ptr)
	if err != nil {
		return nil, err
	}
	conds, err := c.containsConds(s, ptr)
	if err != nil {
		return nil, err
	}
	if maxN >= 0 && minN > maxN {
		return nil, nil
	}
	for _, cc := range conds {
		if cc.maxC >= 0 && cc.minC > cc.maxC {
			return nil, nil
		}
	}
	var prefix []any
	if v, ok := s.Get("prefixItems"); ok {
		list, ok := v.([]any)
		if !ok {
			return nil, errAt(ptr+"/prefixItems", "must be an array of schemas")
		}
		prefix = list
	}
	var items any = true
	if v, ok := s.Get("items"); ok {
		items = v
	}
	// kinds(i)[T]: the item at position i counted for the set T of conditions (nil: none).
	sets := 1 << len(conds)
	cache := map[int][]grammar.Expr{}
	kinds := func(i int) ([]grammar.Expr, error) {
		key := min(i, len(prefix))
		if e, ok := cache[key]; ok {
			return e, nil
		}
		node := items
		if i < len(prefix) {
			node = prefix[i]
		}
		out := make([]grammar.Expr, sets)
		for t := range sets {
			// The item's schema, the counted conditions' schemas, and for each bounded
			// condition not counted one branch of its complement.
			choices := [][]any{{node}}
			for j, cc := range conds {
				switch {
				case t&(1<<j) != 0:
					choices = append(choices, []any{cc.schema})
				case cc.maxC >= 0:
					choices = append(choices, cc.notSchema)
				}
			}
			var alts []grammar.Expr
			var walk func(j int, parts []any) error
			walk = func(j int, parts []any) error {
				if j == len(choices) {
					m, err := c.merge(parts, ptr+"/contains")
					if err != nil {
						return err
					}
					x, err := c.schema(m, ptr+"/contains")
					if err != nil {
						return err
					}
					alts = append(alts, x)
					if len(alts) > MaxComplement {
						return errAt(ptr+"/contains", "the items of this array are a union of more than %d schemas", MaxComplement)
					}
					return nil
				}
				for _, ch := range choices[j] {
					if err := walk(j+1, append(slices.Clone(parts), ch)); err != nil {
						return err
					}
				}
				return nil
			}
			if err := walk(0, nil); err != nil {
				return nil, err
			}
			if a := alt(alts...); a != nil {
				out[t] = c.addRule("contained", a)
			}
		}
		cache[key] = out
		return out, nil
	}
	// State: n items written, and the count of each condition (capped where more no longer
	// matter).
	nCap := max(minN, len(prefix))
	if maxN >= 0 {
		nCap = maxN
	}
	total := nCap + 1
	caps := make([]int, len(conds))
	for j, cc := range conds {
		caps[j] = cc.minC
		if cc.maxC >= 0 {
			caps[j] = cc.maxC
		}
		total *= caps[j] + 1
	}
	if total > MaxCountStates {
		return nil, errAt(ptr, "contains with these counts needs more than %d states", MaxCountStates)
	}
	type state struct {
		n int
		k [MaxContains]int
	}
	norm := func(st state) state {
		if maxN < 0 {
			st.n = min(st.n, nCap)
		}
		for j, cc := range conds {
			if cc.maxC < 0 {
				st.k[j] = min(st.k[j], caps[j])
			}
		}
		return st
	}
	type move struct {
		item grammar.Expr
		to   state
	}
	start := state{}
	moves := map[state][]move{start: nil}
	order := []state{start}
	for i := 0; i < len(order); i++ {
		st := order[i]
		if maxN >= 0 && st.n >= maxN {
			continue
		}
		ks, err := kinds(st.n)
		if err != nil {
			return nil, err
		}
		var ms []move
	sets:
		for t := range sets {
			if ks[t] == nil {
				continue
			}
			to := st
			to.n++
			for j, cc := range conds {
				if t&(1<<j) != 0 {
					if cc.maxC >= 0 && to.k[j] >= cc.maxC {
						continue sets
					}
					to.k[j]++
				}
			}
			ms = append(ms, move{ks[t], norm(to)})
		}
		for _, m := range ms {
			if _, seen := moves[m.to]; !seen {
				moves[m.to] = nil
				order = append(order, m.to)
			}
		}
		moves[st] = ms
	}
	ends := func(st state) bool {
		if st.n < minN {
			return false
		}
		for j, cc := range conds {
			if st.k[j] < cc.minC {
				return false
			}
		}
		return true
	}
	live := map[state]bool{}
	for changed := true; changed; {
		changed = false
		for _, st := range order {
			if live[st] {
				continue
			}
			ok := ends(st)
			for _, m := range moves[st] {
				ok = ok || live[m.to]
			}
			if ok {
				live[st], changed = true, true
			}
		}
	}
	if !live[start] {
		return nil, nil
	}
	ws := c.baseRule("ws")
	comma := seq(ws, lit(","), ws)
	c.n++
	names := map[state]string{}
	for i, st := range order {
		names[st] = fmt.Sprintf("contains-%d-%d", c.n, i)
	}
	// The rule of a state after at least one item: the end, or a comma, an item and the next.
	body := func(st state, sep, end grammar.Expr) grammar.Expr {
		var alts []grammar.Expr
		if ends(st) {
			alts = append(alts, end)
		}
		for _, m := range moves[st] {
			if live[m.to] {
				alts = append(alts, seq(sep, m.item, ref(names[m.to])))
			}
		}
		return alt(alts...)
	}
	// Every live state some move reaches has a rule (the start is written inline, and is
	// reached again when no count is kept).
	target := map[state]bool{}
	for _, st := range order {
		for _, m := range moves[st] {
			target[m.to] = true
		}
	}
	for _, st := range order {
		if live[st] && target[st] {
			c.rules = append(c.rules, grammar.Rule{Name: names[st], Body: body(st, comma, ws)})
		}
	}
	return seq(lit("["), ws, body(start, seq(), seq()), lit("]")), nil
}
