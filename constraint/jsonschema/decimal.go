package jsonschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"

	"github.com/loomlm/loom/constraint/grammar"
)

// Bounds on numbers that may have a fraction. The numbers written are plain decimals,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?, without an exponent; the ones in the bounds are described
// exactly, digit by digit, from the bounds' decimal expansions (a bound written 0.1 means
// one tenth, not the nearest float64).

// decimal is an exact non-negative decimal: its integer part's digits (no leading zeros, "0"
// for zero) and its fraction's digits (no trailing zeros).
type decimal struct {
	intPart, frac string
}

// bound is one side of an interval: a value and whether it is included. inf marks no bound.
type bound struct {
	v   *big.Rat
	inc bool
	inf bool
}

// parseBound reads a bound from a schema number.
func parseBound(n json.Number, inc bool) (bound, error) {
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return bound{}, fmt.Errorf("%s is not a number", n)
	}
	return bound{v: r, inc: inc}, nil
}

// decimalOf writes a non-negative rational with a finite decimal expansion (every bound read
// from JSON has one) as a decimal.
func decimalOf(r *big.Rat) decimal {
	// The expansion ends after as many digits as the larger power of 2 or 5 in the
	// denominator.
	den := new(big.Int).Set(r.Denom())
	digits := 0
	for _, p := range []int64{2, 5} {
		n, q, m := 0, new(big.Int), new(big.Int)
		d := new(big.Int).Set(den)
		for {
			q.QuoRem(d, big.NewInt(p), m)
			if m.Sign() != 0 {
				break
			}
			d.Set(q)
			n++
		}
		digits = max(digits, n)
	}
	s := r.FloatString(digits)
	ip, fp, _ := strings.Cut(s, ".")
	return decimal{intPart: ip, frac: strings.TrimRight(fp, "0")}
}

// decimalRange is the expression of the plain decimals in the interval (lo, hi), or nil when
// there is none.
func decimalRange(lo, hi bound) grammar.Expr {
	if empty(lo, hi) {
		return nil
	}
	zero := new(big.Rat)
	var alts []grammar.Expr
	// Negative values: "-" and a magnitude m = -v with 0 < m, -hi ≤ m, m ≤ -lo.
	if lo.inf || lo.v.Sign() < 0 {
		mlo := bound{v: zero, inc: false}
		if !hi.inf && hi.v.Sign() < 0 {
			mlo = bound{v: new(big.Rat).Neg(hi.v), inc: hi.inc}
		}
		mhi := bound{inf: true}
		if !lo.inf {
			mhi = bound{v: new(big.Rat).Neg(lo.v), inc: lo.inc}
		}
		if m := magnitudes(mlo, mhi); m != nil {
			alts = append(alts, seq(lit("-"), m))
		}
	}
	// Non-negative values.
	if hi.inf || hi.v.Sign() > 0 || hi.v.Sign() == 0 && hi.inc {
		plo := bound{v: zero, inc: true}
		if !lo.inf && lo.v.Sign() >= 0 {
			plo = lo
		}
		if m := magnitudes(plo, hi); m != nil {
			alts = append(alts, m)
		}
	}
	return alt(alts...)
}

// empty reports whether no value lies between lo and hi.
func empty(lo, hi bound) bool {
	if lo.inf || hi.inf {
		return false
	}
	c := lo.v.Cmp(hi.v)
	return c > 0 || c == 0 && !(lo.inc && hi.inc)
}

// magnitudes is the expression of the non-negative plain decimals between lo and hi (lo
// finite and ≥ 0), or nil.
func magnitudes(lo, hi bound) grammar.Expr {
	if empty(lo, hi) {
		return nil
	}
	a := decimalOf(lo.v)
	anyFrac := rep(seq(lit("."), rep(digit, 1, -1)), 0, 1)
	ia, _ := new(big.Int).SetString(a.intPart, 10)
	if !hi.inf {
		b := decimalOf(hi.v)
		ib, _ := new(big.Int).SetString(b.intPart, 10)
		if ia.Cmp(ib) == 0 {
			return seqOrNil(lit(a.intPart), fraction(&a.frac, lo.inc, &b.frac, hi.inc))
		}
		var alts []grammar.Expr
		alts = append(alts, seqOrNil(lit(a.intPart), fraction(&a.frac, lo.inc, nil, false)))
		mid := new(big.Int).Sub(ib, ia)
		if mid.Cmp(big.NewInt(1)) > 0 {
			alts = append(alts, seq(bigRange(new(big.Int).Add(ia, big.NewInt(1)), new(big.Int).Sub(ib, big.NewInt(1))), anyFrac))
		}
		alts = append(alts, seqOrNil(lit(b.intPart), fraction(nil, false, &b.frac, hi.inc)))
		return alt(alts...)
	}
	return alt(
		seqOrNil(lit(a.intPart), fraction(&a.frac, lo.inc, nil, false)),
		seq(bigRange(new(big.Int).Add(ia, big.NewInt(1)), nil), anyFrac),
	)
}

func seqOrNil(a, b grammar.Expr) grammar.Expr {
	if a == nil || b == nil {
		return nil
	}
	return seq(a, b)
}

// bigRange is the expression of the integers in [lo, hi] (hi nil: no bound), lo ≥ 0.
func bigRange(lo, hi *big.Int) grammar.Expr {
	if hi == nil {
		return digitRange(lo.String(), "", true)
	}
	return digitRange(lo.String(), hi.String(), false)
}

// A fraction automaton reads the digits after the point and compares them, as a decimal
// fraction, with the fraction of a lower bound and of an upper bound. Its state on each side
// is how many digits of the bound's fraction were matched so far, or free once the digits
// read are already past it (greater than the lower bound, less than the upper one); a digit
// on the wrong side kills it.
const (
	free = -1
	dead = -2
)

type fracSide struct {
	f     string // the bound's fraction digits; nil side: no bound
	on    bool
	inc   bool
	upper bool
}

func (s fracSide) step(st int, c byte) int {
	if !s.on || st == free {
		return free
	}
	var want byte = '0'
	if st < len(s.f) {
		want = s.f[st]
	}
	switch {
	case c == want:
		if st < len(s.f) {
			return st + 1
		}
		return st
	case (c > want) != s.upper:
		return free
	}
	return dead
}

// end reports whether the digits read so far may end the fraction.
func (s fracSide) end(st int) bool {
	if !s.on || st == free {
		return true
	}
	// Equal so far: the rest of the bound's fraction decides.
	restZero := strings.Trim(s.f[st:], "0") == ""
	if s.upper {
		return s.inc || !restZero
	}
	return s.inc && restZero
}

// fraction is the expression of the optional fraction (ε or "." and digits) of numbers whose
// integer part equals the bounds' (those given), or nil when none fits.
func fraction(lo *string, loInc bool, hi *string, hiInc bool) grammar.Expr {
	l := fracSide{on: lo != nil, inc: loInc}
	if lo != nil {
		l.f = *lo
	}
	u := fracSide{on: hi != nil, inc: hiInc, upper: true}
	if hi != nil {
		u.f = *hi
	}
	type state struct{ l, u int }
	type key struct {
		s       state
		needOne bool
	}
	memo := map[key]grammar.Expr{}
	var digitsFrom, digitsAfter func(s state, needOne bool) grammar.Expr
	// digitsFrom is the expression of the digit strings that may follow state s (at least one
	// digit when needOne) and end where both sides allow.
	digitsFrom = func(s state, needOne bool) grammar.Expr {
		k := key{s, needOne}
		if e, ok := memo[k]; ok {
			return e
		}
		e := digitsAfter(s, needOne)
		memo[k] = e
		return e
	}
	digitsAfter = func(s state, needOne bool) grammar.Expr {
		var loops []rune
		next := map[state][]rune{}
		var order []state
		for c := byte('0'); c <= '9'; c++ {
			t := state{l.step(s.l, c), u.step(s.u, c)}
			if t.l == dead || t.u == dead {
				continue
			}
			if t == s {
				loops = append(loops, rune(c), rune(c))
				continue
			}
			if _, ok := next[t]; !ok {
				order = append(order, t)
			}
			next[t] = append(next[t], rune(c), rune(c))
		}
		var alts []grammar.Expr
		if !needOne && l.end(s.l) && u.end(s.u) {
			alts = append(alts, seq())
		}
		for _, t := range order {
			if rest := digitsFrom(t, false); rest != nil {
				alts = append(alts, seq(class(false, next[t]...), rest))
			}
		}
		if len(loops) > 0 {
			// Digits that keep the state: any number of them, then what follows the state.
			body := alt(alts...)
			loop := class(false, loops...)
			if needOne {
				// At least one digit in all: a looping digit first, or a leaving one.
				withLoop := seqOrNil(seq(loop, rep(loop, 0, -1)), alt(append([]grammar.Expr{seq()}, alts...)...))
				if !(l.end(s.l) && u.end(s.u)) {
					withLoop = seqOrNil(seq(loop, rep(loop, 0, -1)), body)
				}
				return alt(withLoop, body)
			}
			if body == nil {
				return nil
			}
			return seq(rep(loop, 0, -1), body)
		}
		return alt(alts...)
	}
	start := state{0, 0}
	if !l.on {
		start.l = free
	}
	if !u.on {
		start.u = free
	}
	var alts []grammar.Expr
	if l.end(start.l) && u.end(start.u) {
		alts = append(alts, seq())
	}
	if d := digitsFrom(start, true); d != nil {
		alts = append(alts, seq(lit("."), d))
	}
	return alt(alts...)
}
