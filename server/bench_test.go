package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
)

// BenchmarkServe measures streaming completions over HTTP on loopback at 1, 4 and 16
// concurrent streams: aggregate tokens/s (from the usage chunk), time to first token and the
// gaps between streamed chunks (p50, p99; a chunk can carry several tokens' text). The model is the embedded one, or the GGUF file LOOM_BENCH_GGUF names (for example the
// rand110M file `loom bench --synthetic rand110M --keep DIR` writes).
func BenchmarkServe(b *testing.B) {
	model := `builtin = "default"`
	if f := os.Getenv("LOOM_BENCH_GGUF"); f != "" {
		model = fmt.Sprintf("path = %q", f)
	}
	file := filepath.Join(b.TempDir(), "bench.toml")
	toml := "[model]\n" + model + "\n[generation]\nmax_new_tokens = 32\nignore_eos = true\n[strategy]\ntype = \"sample\"\n[[processors]]\ntype = \"temperature\"\nt = 0.8\n"
	if err := os.WriteFile(file, []byte(toml), 0o644); err != nil {
		b.Fatal(err)
	}
	spec, err := pipeline.Load(file)
	if err != nil {
		b.Fatal(err)
	}
	s := server.New(server.Options{MaxRunning: 64})
	defer s.Close()
	if err := s.Add("bench", spec); err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	for _, streams := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			var mu sync.Mutex
			var ttft, itl []time.Duration
			tokens := 0
			start := time.Now()
			for b.Loop() {
				var wg sync.WaitGroup
				for i := range streams {
					wg.Add(1)
					go func() {
						defer wg.Done()
						t0 := time.Now()
						body := fmt.Sprintf(`{"model":"bench","prompt":[1,2,3,4,5,6,7,8],"seed":%d,"stream":true,"stream_options":{"include_usage":true}}`, i)
						resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						defer resp.Body.Close()
						var first, last time.Time
						var gaps []time.Duration
						n := 0
						sc := bufio.NewScanner(resp.Body)
						for sc.Scan() {
							line := sc.Text()
							if !strings.HasPrefix(line, "data: {") {
								continue
							}
							var chunk struct {
								Usage *struct {
									CompletionTokens int `json:"completion_tokens"`
								}
							}
							if err := json.Unmarshal([]byte(line[len("data: "):]), &chunk); err != nil {
								b.Error(err)
								return
							}
							if chunk.Usage != nil {
								n = chunk.Usage.CompletionTokens
								continue
							}
							now := time.Now()
							if first.IsZero() {
								first = now
							} else {
								gaps = append(gaps, now.Sub(last))
							}
							last = now
						}
						mu.Lock()
						defer mu.Unlock()
						if !first.IsZero() {
							ttft = append(ttft, first.Sub(t0))
						}
						itl = append(itl, gaps...)
						tokens += n
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(tokens)/time.Since(start).Seconds(), "tok/s")
			b.ReportMetric(percentile(ttft, 50).Seconds()*1e3, "ttft-p50-ms")
			b.ReportMetric(percentile(ttft, 99).Seconds()*1e3, "ttft-p99-ms")
			b.ReportMetric(percentile(itl, 50).Seconds()*1e3, "itl-p50-ms")
			b.ReportMetric(percentile(itl, 99).Seconds()*1e3, "itl-p99-ms")
		})
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
