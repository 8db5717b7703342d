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
// LOOM_BENCH_KV names: f32, f16, q8_0):
// the cost of the rows a batch or beam search adds. It runs the embedded default model, or the
// GGUF file named by LOOM_BENCH_GGUF.
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
	opts := llama.Options{KVType: kv, KVBudget: 4 << 30}
	if f := os.Getenv("LOOM_BENCH_GGUF"); f != "" {
		m, err = llama.Open(f, opts)
	} else {
		m, _, err = models.Open("default", opts)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	prompt := make([]int32, ctxLen)
	for i := range prompt {
		prompt[i] = int32(100 + i*7%3000)
	}
	var states []core.State
	for range 16 {
		st, err := m.NewState()
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		if err := m.Forward(context.Background(), []core.ForwardItem{{State: st, Tokens: prompt}}); err != nil {
			b.Fatal(err)
		}
		states = append(states, st)
	}
	for _, n := range []int{1, 2, 4, 16} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			batch := make([]core.ForwardItem, n)
			for b.Loop() {
				for i := range batch {
					batch[i] = core.ForwardItem{State: states[i], Tokens: []int32{int32(200 + i)}}
				}
				if err := m.Forward(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
				for _, st := range states[:n] {
					if err := st.Truncate(len(prompt)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
