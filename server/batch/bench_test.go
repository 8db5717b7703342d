package batch_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/server/batch"
)

// BenchmarkDecode measures aggregate decode throughput of concurrent sampling sessions on the
// embedded default model (or the GGUF file named by LOOM_BENCH_GGUF, e.g. one written by
// `loom bench --synthetic rand110M --keep DIR`), with their forwards batched by a Model and
// without (each session calling the model on its own, concurrently).
func BenchmarkDecode(b *testing.B) {
	const tokens = 32
	model := `builtin = "default"`
	if f := os.Getenv("LOOM_BENCH_GGUF"); f != "" {
		model = fmt.Sprintf("path = %q", f)
	}
	p := pipelineOn(b, model)
	for _, streams := range []int{1, 4, 16} {
		for _, mode := range []string{"unbatched", "batched"} {
			b.Run(fmt.Sprintf("streams=%d/%s", streams, mode), func(b *testing.B) {
				pp := *p
				var bm *batch.Model
				if mode == "batched" {
					bm = batch.New(p.Model, batch.Options{})
					defer bm.Close()
					pp.Model = bm
				}
				start := time.Now()
				generated := 0
				for b.Loop() {
					var wg sync.WaitGroup
					var mu sync.Mutex
					for i := range streams {
						leave := func() {}
						if bm != nil {
							leave = bm.Join()
						}
						wg.Add(1)
						go func() {
							defer wg.Done()
							defer leave()
							res, err := core.Generate(context.Background(), &pp, core.Request{PromptTokens: []core.TokenID{1, 2, 3, 4}, Seed: core.SeedOf(uint64(i)), MaxNewTokens: tokens, IgnoreEOS: true})
							if err != nil {
								b.Error(err)
								return
							}
							mu.Lock()
							generated += res.GeneratedTokens
							mu.Unlock()
						}()
					}
					wg.Wait()
				}
				b.ReportMetric(float64(generated)/time.Since(start).Seconds(), "tok/s")
			})
		}
	}
}
