package cache

import "github.com/loomlm/loom/model/kernels"

// quantQ8 quantizes x (Q8Group values) into q as llama.cpp's x86 Q8_0 quantizer does
// (kernels.QuantizeQ8_0: the scale max|x|/127 in half precision, each value x·(127/max|x|)
// rounded to nearest, ties to even) and returns the scale's half-precision bits.
func quantQ8(q []int8, x []float32) uint16 {
	var d [1]uint16
	kernels.QuantizeQ8_0(unsafeBytes(q), d[:], x)
	return d[0]
}

// q8Row is one head's row of values quantized: HeadDim bytes and HeadDim/32 scales.
type q8Row struct {
	q []byte
	d []uint16
}
