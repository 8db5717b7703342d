package jsonschema

import (
	"math"
	"strconv"
	"strings"

	"github.com/loomlm/loom/constraint/grammar"
)

// maxDigits is the most digits an unbounded integer may have.
const maxDigits = 40

// intRange is the expression of the integers in [lo, hi] written without leading zeros;
// math.MinInt64 and math.MaxInt64 stand for no bound.
func intRange(lo, hi int64) grammar.Expr {
	var alts []grammar.Expr
	if lo < 0 {
		// Negative: "-" then the magnitudes in [max(1, -hi), -lo].
		mlo := uint64(1)
		if hi < 0 {
			mlo = uint64(-hi)
		}
		var mhi uint64
		unbounded := lo == math.MinInt64
		if !unbounded {
			mhi = uint64(-lo)
		}
		alts = append(alts, seq(lit("-"), uintRange(mlo, mhi, unbounded)))
	}
	if hi >= 0 {
		alts = append(alts, uintRange(uint64(max(lo, 0)), uint64(hi), hi == math.MaxInt64))
	}
	return alt(alts...)
}

var digit = class(false, '0', '9')

// uintRange is the expression of the non-negative integers in [lo, hi] (hi ignored when
// unbounded), written without leading zeros.
func uintRange(lo, hi uint64, unbounded bool) grammar.Expr {
	return digitRange(strconv.FormatUint(lo, 10), strconv.FormatUint(hi, 10), unbounded)
}

// digitRange is uintRange on decimal digit strings (any length): the integers from ls to hs
// (hs ignored when unbounded), written without leading zeros.
func digitRange(ls, hs string, unbounded bool) grammar.Expr {
	var alts []grammar.Expr
	if unbounded {
		// [lo, 10^len(lo) - 1], then every longer number.
		alts = append(alts, sameLength(ls, strings.Repeat("9", len(ls))))
		alts = append(alts, seq(class(false, '1', '9'), rep(digit, len(ls), maxDigits-1)))
		return alt(alts...)
	}
	for n := len(ls); n <= len(hs); n++ {
		a, b := ls, hs
		if n > len(ls) {
			a = "1" + strings.Repeat("0", n-1)
		}
		if n < len(hs) {
			b = strings.Repeat("9", n)
		}
		alts = append(alts, sameLength(a, b))
	}
	return alt(alts...)
}

// sameLength is the expression of the numbers from a to b, two digit strings of one length
// (a ≤ b).
func sameLength(a, b string) grammar.Expr {
	if len(a) == 0 {
		return seq()
	}
	if a[0] == b[0] {
		return seq(lit(a[:1]), sameLength(a[1:], b[1:]))
	}
	rest := len(a) - 1
	if strings.Trim(a[1:], "0") == "" && strings.Trim(b[1:], "9") == "" {
		return seq(class(false, rune(a[0]), rune(b[0])), rep(digit, rest, rest))
	}
	var alts []grammar.Expr
	alts = append(alts, seq(lit(a[:1]), sameLength(a[1:], strings.Repeat("9", rest))))
	if a[0]+1 <= b[0]-1 {
		alts = append(alts, seq(class(false, rune(a[0]+1), rune(b[0]-1)), rep(digit, rest, rest)))
	}
	alts = append(alts, seq(lit(b[:1]), sameLength(strings.Repeat("0", rest), b[1:])))
	return alt(alts...)
}
