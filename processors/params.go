package processors

import (
	"math"
	"strconv"
	"strings"

	"github.com/loomlm/loom/core"
)

// Validation shared by the constructors. Every float parameter is checked against an interval
// with checkFloat; a parameter that is stored as float32 or that reaches the logits (a
// temperature, a penalty, a bias, a multiple of σ, a surprise in bits) is bounded by the
// float32 range, since logits are float32: a finite float64 beyond it would overflow to ±Inf
// at run time and be reported then as invalid logits, far from the file line that set it.

// maxFloat32 is the largest finite float32.
const maxFloat32 = math.MaxFloat32

// minNormalFloat32 is the smallest positive normal float32 (2^-126): a divisor at least this
// large has a finite reciprocal.
const minNormalFloat32 = 0x1p-126

// interval is the set of values a float parameter accepts: from lo to hi, either end open.
// hi = math.MaxFloat64 means "any finite number ≥ lo". NaN and ±Inf are never in it.
type interval struct {
	lo, hi         float64
	loOpen, hiOpen bool
}

// The intervals the built-in processors use.
var (
	unitInterval   = interval{lo: 0, hi: 1}                             // [0, 1]
	openUnit       = interval{lo: 0, hi: 1, loOpen: true, hiOpen: true} // (0, 1)
	halfOpenUnit   = interval{lo: 0, hi: 1, loOpen: true}               // (0, 1]
	nonNegative32  = interval{lo: 0, hi: maxFloat32}                    // [0, max float32]
	float32Range   = interval{lo: -maxFloat32, hi: maxFloat32}          // every finite float32
	nonNegativeAny = interval{lo: 0, hi: math.MaxFloat64}               // every finite number ≥ 0
	divisor32      = interval{lo: minNormalFloat32, hi: maxFloat32}     // a float32 with a finite reciprocal
	temperature32  = interval{lo: minTemperature, hi: maxFloat32}       // t > 0 (0 is greedy, checked apart)
	atLeastOne     = interval{lo: 1, hi: math.MaxFloat64}               // every finite number ≥ 1
)

func (in interval) contains(v float64) bool {
	return v >= in.lo && v <= in.hi && !(in.loOpen && v == in.lo) && !(in.hiOpen && v == in.hi)
}

// float32Bound reports whether the interval is bounded by the float32 range.
func (in interval) float32Bound() bool { return in.hi == maxFloat32 || in.lo == -maxFloat32 }

func (in interval) String() string {
	if in.hi == math.MaxFloat64 {
		if in.loOpen {
			return "a finite number > " + formatBound(in.lo)
		}
		return "a finite number ≥ " + formatBound(in.lo)
	}
	open, closing := "[", "]"
	if in.loOpen {
		open = "("
	}
	if in.hiOpen {
		closing = ")"
	}
	return open + formatBound(in.lo) + ", " + formatBound(in.hi) + closing
}

// formatBound writes a bound in its shortest form, as a float32 when it is one (so the float32
// range reads 3.4028235e+38, not 3.4028234663852886e+38).
func formatBound(v float64) string {
	if float64(float32(v)) == v {
		return strconv.FormatFloat(v, 'g', -1, 32)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// checkFloat returns nil when v is in the interval and otherwise the *core.ParamError for
// param: "must be in [0, 3.4028235e+38] (float32 range; 0 disables)". note says what special
// values mean ("0 disables"); it may be empty.
func checkFloat(param string, v float64, in interval, note string) error {
	if in.contains(v) {
		return nil
	}
	reason := "must be in " + in.String()
	if in.hi == math.MaxFloat64 {
		reason = "must be " + in.String()
	}
	var notes []string
	if in.float32Bound() {
		notes = append(notes, "float32 range")
	}
	if note != "" {
		notes = append(notes, note)
	}
	if len(notes) > 0 {
		reason += " (" + strings.Join(notes, "; ") + ")"
	}
	return &core.ParamError{Param: param, Value: v, Reason: reason}
}

// checkMinKeep validates a min_keep parameter.
func checkMinKeep(minKeep int) error {
	if minKeep < 1 {
		return &core.ParamError{Param: "min_keep", Value: minKeep, Reason: "must be ≥ 1"}
	}
	return nil
}

// WholeHistory is the window size (Window.LastN, DRYConfig.LastN) that counts every token of
// the sequence the window looks at; 0 disables the processor, N > 0 looks at the last N.
// These are llama.cpp's values (repeat_last_n, dry_penalty_last_n).
const WholeHistory = -1

// checkLastN validates the window size of a processor with a window: -1 (the whole history),
// 0 (disabled) or a positive count. whole says what -1 covers, for the error.
func checkLastN(param string, n int, whole string) error {
	if n < WholeHistory {
		return &core.ParamError{Param: param, Value: n, Reason: "must be ≥ -1 (-1: " + whole + ", 0 disables)"}
	}
	return nil
}
