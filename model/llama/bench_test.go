package llama

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
)

// generateCached decodes n tokens greedily after BOS, one forward of one token per step.
func generateCached(b *testing.B, m *Model, n int) {
	st, _ := m.NewState()
	defer st.Close()
	batch := []core.ForwardItem{{State: st, Tokens: []int32{1}}}
	for range n {
		if err := m.Forward(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		batch[0].Tokens = []int32{argmax(batch[0].Logits[0])}
	}
}

// generateUncached decodes n tokens greedily after BOS without a cache: every step runs the
// whole sequence through the model again.
func generateUncached(b *testing.B, m *Model, n int) {
	toks := []int32{1}
	for range n {
		st, _ := m.NewState()
		batch := []core.ForwardItem{{State: st, Tokens: toks}}
		if err := m.Forward(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		toks = append(toks, argmax(batch[0].Logits[0]))
		st.Close()
	}
}

// BenchmarkGenerate compares decoding with the KV cache (O(N) work for N tokens) with
// recomputing the sequence at every step (O(N²)), on the reference model with its context
// stretched to fit 512 generated tokens. The tok/s metric is generated tokens per second.
func BenchmarkGenerate(b *testing.B) {
	m := openStories(b, "stories260K-f32.gguf", Options{NoPrefixCache: true, ContextLength: 1024, BatchTokens: 1024})
	for _, mode := range []struct {
		name string
		gen  func(*testing.B, *Model, int)
	}{{"cache", generateCached}, {"nocache", generateUncached}} {
		for _, n := range []int{64, 512} {
			b.Run(fmt.Sprintf("%s/%d", mode.name, n), func(b *testing.B) {
				start := time.Now()
				for range b.N {
					mode.gen(b, m, n)
				}
				b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "tok/s")
			})
		}
	}
}

// BenchmarkRand110M measures prompt processing (128 tokens in one forward) and generation
// (128 single-token forwards from an empty context) on the rand110M shape of the llama.cpp
// baselines, per storage type. Writing the models takes a while, so it runs only with
// LOOM_BENCH_RAND110M=1; `loom bench --synthetic rand110M` measures the same.
func BenchmarkRand110M(b *testing.B) {
	if os.Getenv("LOOM_BENCH_RAND110M") == "" {
		b.Skip("set LOOM_BENCH_RAND110M=1 to run")
	}
	for _, typ := range []string{"f32", "f16", "q8_0", "q4_0", "q4_k_m"} {
		path := writeSynthetic(b, "rand110M", typ)
		m, err := Open(path, Options{NoPrefixCache: true})
		if err != nil {
			b.Fatal(err)
		}
		toks := make([]int32, 128)
		for i := range toks {
			toks[i] = int32(100 + i*37%31000)
		}
		b.Run(typ+"/pp128", func(b *testing.B) {
			for range b.N {
				st, _ := m.NewState()
				if err := m.Forward(context.Background(), []core.ForwardItem{{State: st, Tokens: toks}}); err != nil {
					b.Fatal(err)
				}
				st.Close()
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
		b.Run(typ+"/tg128", func(b *testing.B) {
			for range b.N {
				st, _ := m.NewState()
				for _, tok := range toks {
					if err := m.Forward(context.Background(), []core.ForwardItem{{State: st, Tokens: []int32{tok}}}); err != nil {
						b.Fatal(err)
					}
				}
				st.Close()
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
		m.Close()
		os.Remove(path)
	}
}
