package jsonschema

import (
	"encoding/json"
	"fmt"
	"math"

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

// containsArray is an array under contains (with minContains, default 1, and maxContains): a
// walk over the items that counts the ones matching contains. Without maxContains an item
// counted need only match contains and the others are any item, which is exact (an array with
// enough matching items can be read so); with maxContains the others must not match, so the
// complement of contains must be expressible (see complement), or the schema is refused.
func (c *compiler) containsArray(s *Object, ptr string) (grammar.Expr, error) {
	minN, err := count(s, "minItems", ptr)
	if err != nil {
		return nil, err
	}
	maxN, err := count(s, "maxItems", ptr)
	if err != nil {
		return nil, err
	}
	minC, err := count(s, "minContains", ptr)
	if err != nil {
		return nil, err
	}
	maxC, err := count(s, "maxContains", ptr)
	if err != nil {
		return nil, err
	}
	minN = max(minN, 0)
	if minC < 0 {
		minC = 1
	}
	if maxN >= 0 && minN > maxN || maxC >= 0 && minC > maxC {
		return nil, nil
	}
	cond := s.Values["contains"]
	var notCond []any
	if maxC >= 0 {
		if notCond, err = c.complement(cond, ptr+"/contains"); err != nil {
			return nil, err
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
	// The item schema at position i, its pointer, and its expressions when counted and not.
	type elem struct{ counted, other grammar.Expr }
	cache := map[int]*elem{}
	elemAt := func(i int) (*elem, error) {
		key := min(i, len(prefix))
		if e, ok := cache[key]; ok {
			return e, nil
		}
		node, iptr := items, ptr+"/items"
		if i < len(prefix) {
			node, iptr = prefix[i], fmt.Sprintf("%s/prefixItems/%d", ptr, i)
		}
		e := &elem{}
		m, err := c.merge([]any{node, cond}, ptr+"/contains")
		if err != nil {
			return nil, err
		}
		if e.counted, err = c.schema(m, ptr+"/contains"); err != nil {
			return nil, err
		}
		if maxC < 0 {
			if e.other, err = c.schema(node, iptr); err != nil {
				return nil, err
			}
		} else {
			var alts []grammar.Expr
			for _, n := range notCond {
				m, err := c.merge([]any{node, n}, ptr+"/contains")
				if err != nil {
					return nil, err
				}
				x, err := c.schema(m, ptr+"/contains")
				if err != nil {
					return nil, err
				}
				alts = append(alts, x)
			}
			if a := alt(alts...); a != nil {
				e.other = c.addRule("not-contained", a)
			}
		}
		cache[key] = e
		return e, nil
	}
	// State (n, k): n items written (capped where more no longer matter), k counted.
	nCap := max(minN, len(prefix))
	if maxN >= 0 {
		nCap = maxN
	}
	kCap := minC
	if maxC >= 0 {
		kCap = maxC
	}
	if (nCap+1)*(kCap+1) > MaxCountStates {
		return nil, errAt(ptr, "contains with these counts needs more than %d states", MaxCountStates)
	}
	norm := func(n, k int) [2]int {
		if maxN < 0 {
			n = min(n, nCap)
		}
		if maxC < 0 {
			k = min(k, kCap)
		}
		return [2]int{n, k}
	}
	// The states reachable from (0, 0), their moves, and those from which the array can end.
	type move struct {
		item grammar.Expr
		to   [2]int
	}
	moves := map[[2]int][]move{}
	order := [][2]int{{0, 0}}
	moves[[2]int{0, 0}] = nil
	for i := 0; i < len(order); i++ {
		n, k := order[i][0], order[i][1]
		if maxN >= 0 && n >= maxN {
			continue
		}
		e, err := elemAt(n)
		if err != nil {
			return nil, err
		}
		var ms []move
		if e.counted != nil && (maxC < 0 || k < maxC) {
			ms = append(ms, move{e.counted, norm(n+1, k+1)})
		}
		if e.other != nil {
			ms = append(ms, move{e.other, norm(n+1, k)})
		}
		for _, m := range ms {
			if _, seen := moves[m.to]; !seen {
				moves[m.to] = nil
				order = append(order, m.to)
			}
		}
		moves[order[i]] = ms
	}
	ends := func(st [2]int) bool { return st[0] >= minN && st[1] >= minC }
	live := map[[2]int]bool{}
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
	if !live[[2]int{0, 0}] {
		return nil, nil
	}
	ws := c.baseRule("ws")
	comma := seq(ws, lit(","), ws)
	c.n++
	prefixName := fmt.Sprintf("contains-%d-", c.n)
	name := func(st [2]int) string { return fmt.Sprintf("%s%d-%d", prefixName, st[0], st[1]) }
	// The rule of a state after at least one item: the end, or a comma, an item and the next.
	body := func(st [2]int, sep, end grammar.Expr) grammar.Expr {
		var alts []grammar.Expr
		if ends(st) {
			alts = append(alts, end)
		}
		for _, m := range moves[st] {
			if live[m.to] {
				alts = append(alts, seq(sep, m.item, ref(name(m.to))))
			}
		}
		return alt(alts...)
	}
	// Every live state some move reaches has a rule (the start is written inline, and is
	// reached again when no count is kept).
	target := map[[2]int]bool{}
	for _, st := range order {
		for _, m := range moves[st] {
			target[m.to] = true
		}
	}
	for _, st := range order {
		if live[st] && target[st] {
			c.rules = append(c.rules, grammar.Rule{Name: name(st), Body: body(st, comma, ws)})
		}
	}
	return seq(lit("["), ws, body([2]int{0, 0}, seq(), seq()), lit("]")), nil
}
