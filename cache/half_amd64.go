//go:build !purego

package cache

import "github.com/loomlm/loom/internal/cpufeature"

// hasF16C is set when the CPU has F16C and the operating system saves the YMM registers the
// conversions use.
var hasF16C = cpufeature.HasF16C

// encodeHalfF16C converts n float32 values (n a multiple of 8) to half precision.
//
//go:noescape
func encodeHalfF16C(dst *uint16, src *float32, n int)

// decodeHalfF16C converts n half-precision values (n a multiple of 8) to float32.
//
//go:noescape
func decodeHalfF16C(dst *float32, src *uint16, n int)
