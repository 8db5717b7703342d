package kernels

import (
	"math"
	"sync"
)

// halfTable returns the float32 value of every binary16 bit pattern (256 KiB, built on first
// use by the pure-Go kernels).
var halfTable = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for h := range t {
		t[h] = halfToFloat(uint16(h))
	}
	return t
})

// halfToFloat converts an IEEE 754 binary16 value to float32 exactly.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0: // ±0
		return math.Float32frombits(sign)
	}
	// Subnormal: man·2⁻²⁴.
	f := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}

// bf16ToFloat converts a bfloat16 value to float32 exactly.
func bf16ToFloat(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
