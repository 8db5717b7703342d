package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/kernels"
)

// A 2×32 Q8_0 matrix (one block per row: an f16 scale and 32 int8 quants) times a vector of
// ones, then the same product for a batch of two activation rows. The activations are
// quantised to 8 bits first, with a half-precision scale per block of 32 as llama.cpp does:
// a block of ones becomes 127 × 1/127, and 1/127 in half precision is 0.0078735, so the
// products come out a little under 16 and 32.
func ExampleMatMul() {
	const rows, cols = 2, 32
	data := make([]byte, rows*34)
	for r := 0; r < rows; r++ {
		blk := data[r*34:]
		binary.LittleEndian.PutUint16(blk, 0x3800) // d = 0.5 as IEEE half
		for j := 0; j < 32; j++ {
			blk[2+j] = byte(int8(r + 1)) // every quant is r+1, so every weight is (r+1)/2
		}
	}
	m, err := kernels.NewMatrix(ggml.Q8_0, rows, cols, data)
	if err != nil {
		panic(err)
	}

	x := make([]float32, 2*cols) // two activation rows: all ones, all twos
	for c := 0; c < cols; c++ {
		x[c], x[cols+c] = 1, 2
	}
	out := make([]float32, rows)
	kernels.MatVec(out, m, x[:cols])
	fmt.Println(out)

	batch := make([]float32, 2*rows)
	kernels.MatMul(batch, m, x, 2)
	fmt.Println(batch)

	fmt.Println(kernels.Dot([]float32{1, 2, 3}, []float32{4, 5, 6}))
	// Output:
	// [15.999023 31.998047]
	// [15.999023 31.998047 31.998047 63.996094]
	// 32
}

// QuantizeQ8_0 quantises 32 values to one Q8_0 block, as a Q8_0 KV cache stores a run of a key or value:
// the scale is the largest magnitude over 127 (in half precision), each value its multiple
// of 127/max rounded to the nearest byte.
func Example_quantizeQ8() {
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i-16) / 4 // -4 … 3.75
	}
	q := make([]byte, 32)
	d := make([]uint16, 1)
	kernels.QuantizeQ8_0(q, d, x)
	scale := ggml.HalfToFloat32(d[0])
	fmt.Printf("scale %.6f\n", scale)
	for _, i := range []int{0, 1, 16, 31} {
		fmt.Printf("x[%d] = %5.2f → %4d → %6.3f\n", i, x[i], int8(q[i]), float32(int8(q[i]))*scale)
	}
	// Output:
	// scale 0.031494
	// x[0] = -4.00 → -127 → -4.000
	// x[1] = -3.75 → -119 → -3.748
	// x[16] =  0.00 →    0 →  0.000
	// x[31] =  3.75 →  119 →  3.748
}

// Attention over a Q8_0 KV cache quantizes each query once (QuantizeQuery: 8 bits and a scale
// per 32 values, as llama.cpp does for its Q8_0 cache) and scores it against every block of
// keys with AttnScoresQ8, the products of the bytes summed exactly as integers. Three keys of
// 32 values: all ones, all minus twos, and a ramp summing to 1; the query is all halves, so
// the scores come out near 16, −32 and 0.5 (the half-precision scales round them a little).
func ExampleAttnScoresQ8() {
	const hd = 32
	pool, err := cache.NewPool(cache.Config{Layers: 1, KVHeads: 1, HeadDim: hd, DType: cache.Q8_0})
	if err != nil {
		panic(err)
	}
	seq := pool.NewSequence()
	defer seq.Close()
	keys := make([][]float32, 3)
	for r := range keys {
		keys[r] = make([]float32, hd)
		for j := range hd {
			keys[r][j] = []float32{1, -2, float32(j-15) / 16}[r]
		}
	}
	if err := seq.Grow([]int32{1, 2, 3}); err != nil {
		panic(err)
	}
	for pos, k := range keys {
		seq.Put(0, pos, k, make([]float32, hd))
	}
	seq.Commit()

	q := make([]float32, hd)
	for j := range q {
		q[j] = 0.5
	}
	qq := make([]byte, kernels.Q8QueryBytes(hd))
	kernels.QuantizeQuery(qq, q)
	sp := seq.Spans(0, seq.Len(), nil)[0]
	scores := make([]float32, sp.BlockSize) // a block's worth: positions past Rows are not keys
	kernels.AttnScoresQ8(scores, qq, sp.KHead(0), hd, sp.BlockSize)
	fmt.Printf("%.3f\n", scores[:sp.Rows])
	// Output:
	// [15.998 -31.996 0.500]
}

// Four queries scored against one block of 16 keys of 4 elements, stored transposed as a
// cache block holds them (row d: element d of every key): key r is (r, 1, 0, 0) and query j
// is (j, 1, 0, 0), so query j's score of key r is j·r + 1. The rows of four beams that share
// a block score it this way, each key row loaded once for the four: the queries hd values
// apart, their scores bs apart.
func ExampleAttnScoresStrided() {
	const hd, bs = 4, 16
	k := make([]byte, hd*bs*4)
	for r := range bs {
		binary.LittleEndian.PutUint32(k[(0*bs+r)*4:], math.Float32bits(float32(r)))
		binary.LittleEndian.PutUint32(k[(1*bs+r)*4:], math.Float32bits(1))
	}
	queries := make([]float32, 4*hd)
	for j := range 4 {
		queries[j*hd], queries[j*hd+1] = float32(j), 1
	}
	scores := make([]float32, 4*bs)
	kernels.AttnScoresStrided(scores, bs, queries, hd, 4, k, ggml.F32, hd, bs)
	for j := range 4 {
		fmt.Println(scores[j*bs : j*bs+4])
	}
	// Output:
	// [1 1 1 1]
	// [1 2 3 4]
	// [1 3 5 7]
	// [1 4 7 10]
}
