package llama_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
)

// BenchmarkForwardRows times one decoding forward over 1, 2, 4 and 16 sequences (one new token
// each after a 130-token context, or LOOM_BENCH_CONTEXT tokens; F16 KV caches, or those
// LOOM_BENCH_KV names: f32, f16, q8_0), the sequences sharing their prompt's cache blocks
// (rows=N, as beams do) or each with a prompt of its own (distinct/rows=N, as requests do):
// the cost of the rows a batch or beam search adds. It runs the embedded default model, or the
// GGUF file named by LOOM_BENCH_GGUF (read into memory with LOOM_BENCH_NO_MMAP=1, as
// Options.NoMmap does).
func BenchmarkForwardRows(b *testing.B) {
	var m *llama.Model
	var err error
	kv := cache.Float16
	if s := os.Getenv("LOOM_BENCH_KV"); s != "" {
		if kv, err = cache.ParseDType(s); err != nil {
			b.Fatal(err)
		}
	}
	ctxLen := 130
	if s := os.Getenv("LOOM_BENCH_CONTEXT"); s != "" {
		if ctxLen, err = strconv.Atoi(s); err != nil || ctxLen < 1 {
			b.Fatalf("LOOM_BENCH_CONTEXT=%q: want a positive number of tokens", s)
		}
	}
	opts := llama.Options{KVType: kv, KVBudget: 4 << 30, NoMmap: os.Getenv("LOOM_BENCH_NO_MMAP") == "1"}
	if f := os.Getenv("LOOM_BENCH_GGUF"); f != "" {
		m, err = llama.Open(f, opts)
	} else {
		m, _, err = models.Open("default", opts)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	// Two sets of 16 sequences: one prompt for all (its blocks shared through the prefix
	// cache, as beam search's forks share theirs), and a different prompt for each (as
	// concurrent requests have: every sequence's keys and values are read from memory).
	prefill := func(distinct bool) []core.State {
		var states []core.State
		for s := range 16 {
			prompt := make([]int32, ctxLen)
			for i := range prompt {
				prompt[i] = int32(100 + i*7%3000)
				if distinct {
					prompt[i] = int32(100 + (s*131+i*7)%3000)
				}
			}
			st, err := m.NewState()
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			if err := m.Forward(context.Background(), []core.ForwardItem{{State: st, Tokens: prompt}}); err != nil {
				b.Fatal(err)
			}
			states = append(states, st)
		}
		return states
	}
	run := func(b *testing.B, states []core.State, n int) {
		batch := make([]core.ForwardItem, n)
		for b.Loop() {
			for i := range batch {
				batch[i] = core.ForwardItem{State: states[i], Tokens: []int32{int32(200 + i)}}
			}
			if err := m.Forward(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			for _, st := range states[:n] {
				if err := st.Truncate(ctxLen); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	shared, distinct := prefill(false), prefill(true)
	for _, n := range []int{1, 2, 4, 16} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) { run(b, shared, n) })
	}
	for _, n := range []int{4, 16} {
		b.Run(fmt.Sprintf("distinct/rows=%d", n), func(b *testing.B) { run(b, distinct, n) })
	}
}
