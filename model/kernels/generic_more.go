package kernels

import "github.com/loomlm/loom/model/ggml"

// Pure-Go kernels of the types added after the first seven: Q4_1, Q5_0, Q5_1 and IQ4_NL against the
// Q8_0 activations of blocks of 32, Q2_K, Q3_K, Q5_K and IQ4_XS against the activations of
// super-blocks of 256. They use llama.cpp's integer sums per block (or sub-block) and one
// float multiply-add per block, as the other types do. Q4_1 and Q5_1 add m·s per block,
// where s is the block's activation sum as llama.cpp's Q8_1 holds it (act.go, blockSums).

// size32 is the block size in bytes of each 32-element type.
var size32 = map[kind]int{kQ4_1: 20, kQ5_0: 22, kQ5_1: 24, kIQ4_NL: 18}

// decode32 decodes one block of a 32-element type into its quants and returns d and m (a
// switch, not a table of functions, so that q stays on the caller's stack).
func decode32(k kind, blk []byte, q *[32]int32) (d, m float32) {
	switch k {
	case kQ4_1:
		return ggml.Q4_1Ints(blk, q)
	case kQ5_0:
		return ggml.Q5_0Ints(blk, q), 0
	case kQ5_1:
		return ggml.Q5_1Ints(blk, q)
	default:
		return ggml.IQ4_NLInts(blk, q), 0
	}
}

// dotBlocks32 returns the block loop of a 32-element type.
func dotBlocks32(k kind) func(wr, xr []byte, b0, b1 int) float32 {
	size := size32[k]
	withMin := k == kQ4_1 || k == kQ5_1
	return func(wr, xr []byte, b0, b1 int) float32 {
		var sum float32
		var wq [32]int32
		for b := b0; b < b1; b++ {
			d, m := decode32(k, wr[b*size:(b+1)*size], &wq)
			xd, _, q := act32Block(xr, b)
			var s int32
			for j := 0; j < 32; j++ {
				s += wq[j] * int32(int8(q[j]))
			}
			sum += float32(s) * (d * xd)
			if withMin {
				sum += m * lef32(xr[b/4*act32Group+act32Sum+4*(b%4):])
			}
		}
		return sum
	}
}

// genericKernels32 builds the kernels of a 32-element type from its block loop.
func genericKernels32(k kind) [4]dotFunc {
	size := size32[k]
	blocks := dotBlocks32(k)
	return genericKernels(4*size, act32Group, func(wr, xr []byte) float32 { return blocks(wr, xr, 0, len(wr)/size) })
}

// sizeK is the super-block size in bytes of each type of 256-element super-blocks.
var sizeK = map[kind]int{kQ2_K: 84, kQ3_K: 110, kQ5_K: 176, kIQ4_XS: 136}

// decodeK decodes one super-block (a switch, so that kq stays on the caller's stack).
func decodeK(k kind, blk []byte, kq *ggml.KQuant) {
	switch k {
	case kQ2_K:
		ggml.Q2_KInts(blk, kq)
	case kQ3_K:
		ggml.Q3_KInts(blk, kq)
	case kQ5_K:
		ggml.Q5_KInts(blk, kq)
	default:
		ggml.IQ4_XSInts(blk, kq)
	}
}

// dotRowK returns the row product of a type of super-blocks of 256.
func dotRowK(k kind) func(wr, xr []byte) float32 {
	size := sizeK[k]
	return func(wr, xr []byte) float32 {
		var sum float32
		var kq ggml.KQuant
		for b := 0; b < len(wr)/size; b++ {
			decodeK(k, wr[b*size:(b+1)*size], &kq)
			xb := xr[b*actKBytes : (b+1)*actKBytes]
			q := xb[actKQ : actKQ+256]
			var s, m int32
			for sub := 0; sub < 256/kq.Sub; sub++ {
				var g int32
				for j := sub * kq.Sub; j < (sub+1)*kq.Sub; j++ {
					g += kq.Q[j] * int32(int8(q[j]))
				}
				s += kq.Scale[sub] * g
				if kq.MinScale[sub] != 0 {
					var ys int32
					if kq.Sub == 16 {
						ys = int32(int16(le16(xb[actKSum16+2*sub:])))
					} else {
						ys = int32(int16(le16(xb[actKSum32+2*sub:])))
					}
					m += kq.MinScale[sub] * ys
				}
			}
			xd := lef32(xb)
			sum += float32(s)*(kq.D*xd) - float32(m)*(kq.Min*xd)
		}
		return sum
	}
}

// fillMissing gives an implementation the pure-Go kernels of the types it has none for.
func fillMissing(im *impl) {
	for k := range im.dot {
		if im.dot[k][0] == nil {
			im.dot[k] = genericImpl.dot[k]
		}
	}
}
