package jsonschema

import (
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/regex"
)

// multipleOf reads multipleOf as an exact positive rational.
func multipleOf(v any, ptr string) (*big.Rat, error) {
	n, ok := v.(json.Number)
	r, ok2 := new(big.Rat).SetString(string(n))
	if !ok || !ok2 || r.Sign() <= 0 {
		return nil, errAt(ptr+"/multipleOf", "must be a number above 0")
	}
	return r, nil
}

// decimalScale returns a and e with m = a / 10^e, a an integer (m must be a decimal, as every
// JSON number is).
func decimalScale(m *big.Rat) (*big.Int, int, bool) {
	ten := big.NewInt(10)
	p := new(big.Int).Set(m.Num())
	q := new(big.Int).Set(m.Denom())
	e := 0
	pow := big.NewInt(1)
	for new(big.Int).Mod(pow, q).Sign() != 0 {
		if e > 400 {
			return nil, 0, false
		}
		pow.Mul(pow, ten)
		e++
	}
	a := new(big.Int).Mul(p, new(big.Int).Quo(pow, q))
	return a, e, true
}

// multipleDFA is the automaton of the numbers, written as plain decimals (an integer part
// without leading zeros, a fraction that does not end in 0), that are multiples of m: with
// m = a/10^e, the digits read so far are kept modulo a, and a number with f fraction digits
// (f ≤ e) is a multiple when its digits times 10^(e−f) are 0 modulo a. integer keeps the
// integers only (multiples of a / gcd(a, 10^e)).
func multipleDFA(m *big.Rat, integer bool, ptr string) (*regex.DFA, error) {
	aBig, e, ok := decimalScale(m)
	if !ok {
		return nil, errAt(ptr+"/multipleOf", "%s is not a decimal", m.RatString())
	}
	if integer {
		g := new(big.Int).GCD(nil, nil, aBig, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(e)), nil))
		aBig.Quo(aBig, g)
		e = 0
	}
	if !aBig.IsInt64() || aBig.Int64()*int64(2*e+1)+3 > regex.MaxStates {
		return nil, errAt(ptr+"/multipleOf", "multipleOf %s needs more than %d states", m.RatString(), regex.MaxStates)
	}
	a := int(aBig.Int64())
	// pow10[k] = 10^k mod a.
	pow10 := make([]int, e+1)
	pow10[0] = 1 % a
	for k := 1; k <= e; k++ {
		pow10[k] = pow10[k-1] * 10 % a
	}
	const start, minus, zero = 0, 1, 2
	intState := func(r int) int { return 3 + r }
	// point(r): just after the point; frac(r, f, nz): f fraction digits, the last nonzero or not.
	point := func(r int) int { return 3 + a + r }
	frac := func(r, f int, nz bool) int {
		i := 3 + 2*a + ((f-1)*a+r)*2
		if nz {
			i++
		}
		return i
	}
	n := 3 + 2*a + 2*a*e
	d := &regex.DFA{States: make([]regex.State, n)}
	digitEdges := func(next func(dg int) int) []regex.Edge {
		var out []regex.Edge
		for dg := 0; dg <= 9; dg++ {
			to := next(dg)
			if to < 0 {
				continue
			}
			r := rune('0' + dg)
			if k := len(out); k > 0 && out[k-1].To == to && out[k-1].Hi+1 == r {
				out[k-1].Hi = r
				continue
			}
			out = append(out, regex.Edge{Lo: r, Hi: r, To: to})
		}
		return out
	}
	withPoint := func(edges []regex.Edge, r int) []regex.Edge {
		if e == 0 {
			return edges
		}
		return append([]regex.Edge{{Lo: '.', Hi: '.', To: point(r)}}, edges...)
	}
	leading := func(dg int) int {
		if dg == 0 {
			return zero
		}
		return intState(dg % a)
	}
	d.States[start].Edges = append([]regex.Edge{{Lo: '-', Hi: '-', To: minus}}, digitEdges(leading)...)
	d.States[minus].Edges = digitEdges(leading)
	d.States[zero] = regex.State{Accept: true, Edges: withPoint(nil, 0)}
	for r := 0; r < a; r++ {
		d.States[intState(r)] = regex.State{
			Accept: r*pow10[e]%a == 0,
			Edges:  withPoint(digitEdges(func(dg int) int { return intState((10*r + dg) % a) }), r),
		}
		if e == 0 {
			continue
		}
		d.States[point(r)].Edges = digitEdges(func(dg int) int { return frac((10*r+dg)%a, 1, dg != 0) })
		for f := 1; f <= e; f++ {
			for _, nz := range []bool{false, true} {
				st := &d.States[frac(r, f, nz)]
				st.Accept = nz && r*pow10[e-f]%a == 0
				if f < e {
					st.Edges = digitEdges(func(dg int) int { return frac((10*r+dg)%a, f+1, dg != 0) })
				}
			}
		}
	}
	return d, nil
}

// multiples is the expression of the numbers that are multiples of m, within base (the
// numbers within the schema's bounds, a regular expression of the compiler's rules; nil when
// there are none): multipleDFA, times the automaton of base. Without bounds the integer part
// has no limit on its digits.
func (c *compiler) multiples(base grammar.Expr, m *big.Rat, integer bool, ptr string) (grammar.Expr, error) {
	md, err := multipleDFA(m, integer, ptr)
	if err != nil {
		return nil, err
	}
	parts := []*regex.DFA{md}
	if base != nil {
		rules := map[string]grammar.Expr{}
		for _, r := range c.rules {
			rules[r.Name] = r.Body
		}
		bd, err := regex.DFAOfRules(base, rules)
		if err != nil {
			return nil, errAt(ptr+"/multipleOf", "%v", err)
		}
		parts = append(parts, bd)
	}
	d, err := regex.Intersect(parts...)
	if err != nil {
		return nil, errAt(ptr+"/multipleOf", "%v", err)
	}
	if d == nil {
		return nil, nil
	}
	c.n++
	rs := d.Grammar(fmt.Sprintf("multiple-%d-", c.n))
	c.rules = append(c.rules, rs...)
	return ref(rs[0].Name), nil
}

// intersectNumbers is the expression of the numbers both a and b (expressions of regular
// languages over the compiler's rules) accept, through their automata.
func (c *compiler) intersectNumbers(a, b grammar.Expr, ptr string) (grammar.Expr, error) {
	rules := map[string]grammar.Expr{}
	for _, r := range c.rules {
		rules[r.Name] = r.Body
	}
	var ds []*regex.DFA
	for _, e := range []grammar.Expr{a, b} {
		d, err := regex.DFAOfRules(e, rules)
		if err != nil {
			return nil, errAt(ptr, "%v", err)
		}
		ds = append(ds, d)
	}
	d, err := regex.Intersect(ds...)
	if err != nil {
		return nil, errAt(ptr, "%v", err)
	}
	if d == nil {
		return nil, nil
	}
	c.n++
	rs := d.Grammar(fmt.Sprintf("numbers-%d-", c.n))
	c.rules = append(c.rules, rs...)
	return ref(rs[0].Name), nil
}

// plainNumber is a number written as a plain decimal in canonical form: no exponent, no
// leading zero, a fraction that does not end in 0.
const plainNumber = `-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?`

// nonMultiples is the expression of the numbers of base (an expression of a regular language
// over the compiler's rules) that are not multiples of m, written as plain decimals: base's
// automaton times plainNumber's, minus multipleDFA.
func (c *compiler) nonMultiples(base grammar.Expr, m *big.Rat, ptr string) (grammar.Expr, error) {
	md, err := multipleDFA(m, false, ptr)
	if err != nil {
		return nil, err
	}
	rules := map[string]grammar.Expr{}
	for _, r := range c.rules {
		rules[r.Name] = r.Body
	}
	bd, err := regex.DFAOfRules(base, rules)
	if err != nil {
		return nil, errAt(ptr, "%v", err)
	}
	pd, err := regex.DFAOf(plainNumber)
	if err != nil {
		return nil, errAt(ptr, "%v", err)
	}
	d, err := regex.Product([]*regex.DFA{bd, pd, md}, func(set uint64) bool { return set == 3 })
	if err != nil {
		return nil, errAt(ptr, "%v", err)
	}
	if d == nil {
		return nil, nil
	}
	c.n++
	rs := d.Grammar(fmt.Sprintf("non-multiple-%d-", c.n))
	c.rules = append(c.rules, rs...)
	return ref(rs[0].Name), nil
}
