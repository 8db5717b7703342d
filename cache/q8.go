package cache

// q8Row is one head's row of values quantized (kernels.QuantizeQ8_0): HeadDim bytes and
// HeadDim/32 scales, the scratch of a Put that writes a key transposed.
type q8Row struct {
	q []byte
	d []uint16
}
