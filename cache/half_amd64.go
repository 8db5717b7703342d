//go:build !purego

package cache

import "golang.org/x/sys/cpu"

// hasF16C is set on CPUs with AVX2, all of which have F16C (the conversions need the YMM
// registers the operating system saves when it reports AVX2).
var hasF16C = cpu.X86.HasAVX2

// encodeHalfF16C converts n float32 values (n a multiple of 8) to half precision.
//
//go:noescape
func encodeHalfF16C(dst *uint16, src *float32, n int)

// decodeHalfF16C converts n half-precision values (n a multiple of 8) to float32.
//
//go:noescape
func decodeHalfF16C(dst *float32, src *uint16, n int)
