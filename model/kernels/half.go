package kernels

import (
	"sync"

	"github.com/loomlm/loom/model/ggml"
)

// halfTable returns the float32 value of every binary16 bit pattern (256 KiB, built on first
// use by the pure-Go kernels).
var halfTable = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for h := range t {
		t[h] = ggml.HalfToFloat32(uint16(h))
	}
	return t
})
