package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/loomlm/loom/model/ggml"
)

// Packed weights. The row-major block layout of a GGUF file makes a product sum each weight
// row across a vector register and then reduce the register to one number, per row and per
// activation row, with a conversion and a scale per pair of blocks; for a batch of activation
// rows that bookkeeping costs more than the multiplications. Pack copies a matrix of a type
// with packed kernels into groups of 16 rows interleaved block by block, so that each row has
// its own lane of a 16-lane register: one VPDPBUSD multiplies four weights of each of the 16
// rows by four activation quants broadcast to all lanes, a row's block sum ends in its lane,
// and one conversion and one multiply-add per block serve 16 rows (llama.cpp repacks Q4_0 for
// its AVX2 and AVX-512 kernels the same way).
//
// A packed matrix keeps its original Data (token embeddings are read from it row by row); the
// packed copy is used for every product of the matrix, whatever the number of activation
// rows, so batched and one-by-one products still agree bit for bit.

// packed is a matrix's rows in groups of 16 (the last padded with zero rows).
type packed struct {
	data       []byte
	nb         int // blocks of 32 per row
	groupBytes int // bytes of a group of 16 rows
}

// groups returns the packed groups [g0, g1), sharing the data.
func (p *packed) groups(g0, g1 int) *packed {
	return &packed{data: p.data[g0*p.groupBytes : g1*p.groupBytes], nb: p.nb, groupBytes: p.groupBytes}
}

// packedLayout describes a type's packed blocks: each block of a 16-row group holds the rows'
// f16 scales (32 bytes), then chunks of 64 bytes, chunk c holding four bytes of each row (row
// r at 4r).
type packedLayout struct {
	srcBlock int // bytes of a block in the GGUF layout: f16 scale, then the quants
	chunks   int // chunks of 64 bytes per packed block
	// nibbles: chunk c holds quant bytes 4c…4c+3 (Q4_0, IQ4_NL: low nibble element j, high
	// nibble element j+16); otherwise the quants themselves plus 128 (Q8_0).
	nibbles bool
}

func (l packedLayout) blockBytes() int { return 32 + 64*l.chunks }

// packedLayouts lists the types with packed kernels.
var packedLayouts = map[ggml.Type]packedLayout{
	ggml.Q4_0:   {srcBlock: 18, chunks: 4, nibbles: true},
	ggml.IQ4_NL: {srcBlock: 18, chunks: 4, nibbles: true},
	ggml.Q8_0:   {srcBlock: 34, chunks: 8},
}

// packedFunc is the signature of a kernel over packed rows: groups consecutive groups of 16
// rows (nb blocks each) against nx activation rows at x + i·xstride, row g·16 + r's result for
// activation row i stored at out[i·ostride + g·16 + r].
type packedFunc func(w *byte, groups, nb int, x *byte, xstride int, out *float32, ostride int)

// Pack returns m with its rows packed for the current kernels when its type has packed
// kernels (Q4_0, Q8_0 and IQ4_NL on CPUs with AVX-512 VNNI) and it has at least 16 rows;
// otherwise m as it is. The packed copy takes as much memory as the data again.
func Pack(m Matrix) Matrix {
	l, ok := packedLayouts[m.Type]
	if !ok || m.packed != nil || m.Rows < 16 || m.Validate() != nil || currentImpl().packed[kernelOf(m.Type).kind][0] == nil {
		return m
	}
	nb, rb, pb := m.Cols/32, m.RowBytes(), l.blockBytes()
	groups := (m.Rows + 15) / 16
	data := make([]byte, groups*nb*pb)
	var flip uint32 // q + 128 for Q8_0
	if !l.nibbles {
		flip = 0x80808080
	}
	// Groups are independent: shared out among the workers (a large model packs gigabytes).
	Parallel(groups, workers(), func(g, _ int) {
		for r := range min(16, m.Rows-g*16) { // rows past the matrix stay zero: scale 0
			row := m.Data[(g*16+r)*rb : (g*16+r+1)*rb]
			for b := range nb {
				src := row[b*l.srcBlock:]
				blk := data[(g*nb+b)*pb:]
				blk[2*r], blk[2*r+1] = src[0], src[1]
				for c := range l.chunks {
					v := binary.LittleEndian.Uint32(src[2+4*c:])
					binary.LittleEndian.PutUint32(blk[32+64*c+4*r:], v^flip)
				}
			}
		}
	})
	m.packed = &packed{data: data, nb: nb, groupBytes: nb * pb}
	return m
}

// Packed reports whether m's products run on a packed copy of its rows (see Pack).
func (m Matrix) Packed() bool { return m.packed != nil }

// packedStepBytes is the packed weights every group of activation rows passes over before
// the next: half an L1 (one group of 16 rows of a 768-wide Q8_0 matrix, 13 KB; a wider
// matrix's groups go one at a time), so that the activation groups after the first read the
// weights from L1. Steps of stepBytes (from L2) made the 110M Q8_0 model's products slower
// (BenchmarkPackedForward, 2026-11-28, three rounds alternating: 8 rows 1 406–1 715 →
// 1 729–1 942 tokens/s, 16 rows 2 003–2 329 → 2 278–2 569, 128 rows within noise; 48 KB
// steps were between).
const packedStepBytes = 24 << 10

// pairRows is the fewest activation rows whose products use the pairs kernel (impl.packedPairs)
// in steps of two groups or more: it broadcasts each activation quad once for two groups,
// 22–25 % faster on weights in L1, but for fewer rows the product is bound by the weights'
// stream and the two-group steps cost more than they save (BenchmarkPackedForward: 128 rows
// 3 041–3 069 → 3 626–3 832 tokens/s; with pairs from 32 rows, 32 rows within noise and 8
// rows slower; at 4 rows, one pass over all groups, 0.90–0.94×).
const pairRows = 64

// packedRows computes rows [r0, r1) of a product over a packed matrix for all n activation
// rows. Groups of 16 rows that [r0, r1) or the matrix cut are computed whole into scratch, and
// only their rows in range are kept.
func (p *product) packedRows(n, r0, r1 int, kern *[4]packedFunc) {
	m, a := p.m, &p.a
	nb, groupBytes := m.packed.nb, m.packed.groupBytes
	// Groups in steps small enough to stay in L1 while every activation group passes over
	// them (see packedStepBytes).
	pairs := p.pairs // the 4-row groups' kernel over pairs of groups, if they take it
	if n < pairRows {
		pairs = nil
	}
	step := (r1 - r0 + 15) / 16
	if n > 4 {
		step = max(1, packedStepBytes/groupBytes)
		if pairs != nil {
			step = max(2, step)
		}
	}
	var scratch *[4 * 16]float32 // for cut groups only: the kernel's pointer makes it escape
	for g0 := r0 / 16; g0*16 < r1; g0 += step {
		g1 := min(g0+step, (r1+15)/16)
		for i := 0; i < n; i += 4 {
			nx := min(4, n-i)
			k, kp := kern[nx-1], pairs
			if nx < 4 {
				kp = nil
			}
			xb := &a.b[i*a.stride]
			// whole groups within [r0, r1) and the matrix
			full0, full1 := max(g0, (r0+15)/16), min(g1, r1/16, m.Rows/16)
			if full1 > full0 && i > 0 && n > 4 {
				// The later activation groups read the step's weights from cache, while memory
				// would sit idle: they ask for the next step's weights (to L2), a share each,
				// spread between the groups (a 16-row step of the 110M Q8_0 model 3–12 % faster).
				end := min(g1+step, (r1+15)/16) // this call's rows only: the others' go to other cores
				next := m.packed.data[g1*groupBytes : max(g1, end)*groupBytes]
				later := (n+3)/4 - 1 // activation groups after the first
				share := (len(next) + later - 1) / later
				lo := min(len(next), (i/4-1)*share)
				part := next[lo:min(len(next), lo+share)]
				per := (len(part) + (full1 - full0) - 1) / (full1 - full0)
				for g := full0; g < full1; {
					count := 1
					if kp != nil && g+1 < full1 {
						count = 2
					}
					if len(part) > 0 {
						c := min(len(part), count*per)
						if prefetchL2Fn != nil {
							prefetchL2Fn(&part[0], c)
						}
						part = part[c:]
					}
					p.packedGroups(k, kp, g, count, i)
					g += count
				}
			} else if full1 > full0 {
				p.packedGroups(k, kp, full0, full1-full0, i)
			}
			for g := g0; g < g1; g++ {
				if g >= full0 && g < full1 {
					continue
				}
				if scratch == nil {
					scratch = new([4 * 16]float32)
				}
				k(&m.packed.data[g*groupBytes], 1, nb, xb, a.stride, &scratch[0], 16)
				for j := range nx {
					for r := max(r0, g*16); r < min(r1, g*16+16, m.Rows); r++ {
						p.out[(i+j)*m.Rows+r] = scratch[j*16+r-g*16]
					}
				}
			}
		}
	}
}

// packedGroups computes count whole groups of 16 rows from group g for the activation rows
// from row i with kernel k, their pairs with kp where it is not nil (the pairs kernel, for
// four activation rows).
func (p *product) packedGroups(k, kp packedFunc, g, count, i int) {
	m, a := p.m, &p.a
	nb, groupBytes := m.packed.nb, m.packed.groupBytes
	xb := &a.b[i*a.stride]
	if kp != nil && count >= 2 {
		kp(&m.packed.data[g*groupBytes], count/2, nb, xb, a.stride, &p.out[i*m.Rows+g*16], m.Rows)
		g, count = g+count&^1, count&1
	}
	if count > 0 {
		k(&m.packed.data[g*groupBytes], count, nb, xb, a.stride, &p.out[i*m.Rows+g*16], m.Rows)
	}
}

// genericPacked is the pure-Go kernel of packed rows of type t, the assembly's arithmetic in
// the same order (its float multiply-add rounds twice where the assembly's rounds once).
func genericPacked(t ggml.Type, nx int) packedFunc {
	l := packedLayouts[t]
	pb := l.blockBytes()
	return func(w *byte, groups, nb int, x *byte, xstride int, out *float32, ostride int) {
		var u [32]int32 // a row's unsigned weights of a block
		for g := range groups {
			for i := range nx {
				xr := bytesAt(x, i*xstride, act32Bytes(32*nb))
				var acc [16]float32
				for b := range nb {
					blk := bytesAt(w, (g*nb+b)*pb, pb)
					dx, corr, q := act32Block(xr, b)
					for r := range 16 {
						for c := range l.chunks {
							for j := range 4 {
								v := blk[32+64*c+4*r+j]
								switch t {
								case ggml.Q8_0:
									u[4*c+j] = int32(v)
								case ggml.Q4_0:
									u[4*c+j], u[16+4*c+j] = int32(v&15), int32(v>>4)
								case ggml.IQ4_NL:
									u[4*c+j], u[16+4*c+j] = int32(ggml.IQ4Values[v&15])+128, int32(ggml.IQ4Values[v>>4])+128
								}
							}
						}
						sum := corr // −8·Σq: the Q4_0 offset
						if t != ggml.Q4_0 {
							sum *= 16 // −128·Σq
						}
						for j := range 32 {
							sum += u[j] * int32(int8(q[j]))
						}
						s := ggml.HalfToFloat32(le16(blk[2*r:])) * dx
						acc[r] = float32(math.FMA(float64(float32(sum)), float64(s), float64(acc[r])))
					}
				}
				copy(unsafe.Slice(floatAt(out, i*ostride+16*g), 16), acc[:])
			}
		}
	}
}

func genericPackedKernels(t ggml.Type) [4]packedFunc {
	return [4]packedFunc{genericPacked(t, 1), genericPacked(t, 2), genericPacked(t, 3), genericPacked(t, 4)}
}
