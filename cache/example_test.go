package cache_test

import (
	"fmt"

	"github.com/loomlm/loom/cache"
)

// A forward pass reserves positions, writes each layer's K and V rows, commits, and reads
// the rows back for attention.
func Example() {
	pool, err := cache.NewPool(cache.Config{Layers: 2, KVHeads: 2, HeadDim: 2, BlockSize: 16, DType: cache.Float16})
	if err != nil {
		panic(err)
	}
	seq := pool.NewSequence()
	defer seq.Close()

	tokens := []int32{1, 42, 7}
	if err := seq.Grow(tokens); err != nil {
		panic(err) // wraps cache.ErrBudget when the request does not fit
	}
	for layer := 0; layer < 2; layer++ {
		for pos := range tokens {
			k := []float32{float32(pos), 1, 2, 3}
			v := []float32{float32(layer), 0, 0, 1}
			seq.Put(layer, pos, k, v)
		}
	}
	seq.Commit()

	for _, sp := range seq.Spans(1, seq.Len(), nil) {
		fmt.Printf("positions %d-%d: %d bytes of values for head 0\n", sp.Start, sp.Start+sp.Rows-1, len(sp.VHead(0)))
	}
	fmt.Println("bytes per token:", pool.BytesPerToken())
	// Output:
	// positions 0-2: 12 bytes of values for head 0
	// bytes per token: 32
}

// Forking shares blocks copy-on-write; truncating rolls a sequence back.
func ExampleSequence_Fork() {
	pool, _ := cache.NewPool(cache.Config{Layers: 1, KVHeads: 1, HeadDim: 2, BlockSize: 4})
	seq := pool.NewSequence()
	seq.Grow([]int32{1, 2, 3, 4, 5, 6})
	for pos := range 6 {
		seq.Put(0, pos, []float32{float32(pos), 0}, []float32{0, 0})
	}
	seq.Commit()

	beam := seq.Fork() // shares both blocks
	beam.Grow([]int32{7})
	beam.Put(0, 6, []float32{70, 0}, []float32{0, 0})
	beam.Commit()
	seq.Truncate(4) // drop tokens 5 and 6 from the original only

	fmt.Println(seq.Tokens(nil), beam.Tokens(nil))
	st := pool.Stats()
	fmt.Println("blocks:", st.InUse, "copies:", st.Copies)
	// Output:
	// [1 2 3 4] [1 2 3 4 5 6 7]
	// blocks: 2 copies: 1
}

// A new sequence whose prompt starts with published blocks reuses them.
func ExampleSequence_MatchPrefix() {
	pool, _ := cache.NewPool(cache.Config{Layers: 1, KVHeads: 1, HeadDim: 2, BlockSize: 4})
	prompt := []int32{1, 10, 11, 12, 13, 14, 15, 16, 17, 18}

	first := pool.NewSequence()
	first.Grow(prompt)
	for pos := range prompt {
		first.Put(0, pos, []float32{1, 2}, []float32{3, 4})
	}
	first.Commit() // publishes the two full blocks
	first.Close()  // they stay cached

	second := pool.NewSequence()
	reused := second.MatchPrefix(prompt[:len(prompt)-1])
	fmt.Println("reused", reused, "of", len(prompt), "tokens; compute", len(prompt)-reused)
	// Output:
	// reused 8 of 10 tokens; compute 2
}
