package plugins

import (
	"math"
	"unsafe"
)

// firstInvalid returns the index of the first NaN or +Inf in xs, or -1. -Inf (a ban) is
// valid. It reads two floats per 64-bit word: in each 32-bit lane, the magnitude plus 2²³
// (plus 2²³−1 for negative lanes) reaches the lane's top bit exactly when the value is +Inf
// or NaN, and no lane carries into the next.
func firstInvalid(xs []float32) int {
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(xs))), len(xs)/2)
	const (
		magnitude = 0x7fffffff7fffffff
		limit     = 0x0080000000800000
		signLow   = 0x0000000100000001
	)
	var a0, a1, a2, a3 uint64
	i := 0
	for ; i+4 <= len(words); i += 4 {
		w := words[i : i+4 : i+4]
		a0 |= w[0]&magnitude + limit - (w[0]>>31)&signLow
		a1 |= w[1]&magnitude + limit - (w[1]>>31)&signLow
		a2 |= w[2]&magnitude + limit - (w[2]>>31)&signLow
		a3 |= w[3]&magnitude + limit - (w[3]>>31)&signLow
	}
	acc := a0 | a1 | a2 | a3
	for ; i < len(words); i++ {
		acc |= words[i]&magnitude + limit - (words[i]>>31)&signLow
	}
	bad := acc&0x8000000080000000 != 0
	if len(xs)%2 == 1 {
		bad = bad || invalid(xs[len(xs)-1])
	}
	if !bad {
		return -1
	}
	for j, v := range xs {
		if invalid(v) {
			return j
		}
	}
	return -1
}

func invalid(v float32) bool { return v != v || math.IsInf(float64(v), 1) }
