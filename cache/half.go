package cache

import "github.com/loomlm/loom/model/ggml"

// EncodeHalf converts src to IEEE half precision into dst, rounding to nearest even, with the
// CPU's F16C instructions where available. len(dst) must equal len(src).
func EncodeHalf(dst []uint16, src []float32) {
	if len(dst) != len(src) {
		panic("cache: EncodeHalf of slices of different lengths")
	}
	n := 0
	if hasF16C && len(src) >= 8 {
		n = len(src) &^ 7
		encodeHalfF16C(&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = ggml.Float32ToHalf(src[i])
	}
}

// DecodeHalf converts the half-precision values of src to float32 into dst (exactly), with
// the CPU's F16C instructions where available. len(dst) must equal len(src).
func DecodeHalf(dst []float32, src []uint16) {
	if len(dst) != len(src) {
		panic("cache: DecodeHalf of slices of different lengths")
	}
	n := 0
	if hasF16C && len(src) >= 8 {
		n = len(src) &^ 7
		decodeHalfF16C(&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = ggml.HalfToFloat32(src[i])
	}
}
