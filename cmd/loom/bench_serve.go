package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
	"github.com/loomlm/loom/pipeline"
)

// serveBench is one line of `loom bench serve`: an engine at a number of concurrent streams.
type serveBench struct {
	Engine      string  `json:"engine"`
	Streams     int     `json:"streams"`
	Requests    int     `json:"requests"`
	Tokens      int     `json:"tokens"`
	Seconds     float64 `json:"seconds"`
	TokensPerS  float64 `json:"tokens_per_second"`
	TTFTp50Ms   float64 `json:"ttft_p50_ms"`
	TTFTp99Ms   float64 `json:"ttft_p99_ms"`
	ITLp50Ms    float64 `json:"itl_p50_ms"`
	ITLp99Ms    float64 `json:"itl_p99_ms"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	ModelFile   string  `json:"model"`
	MaxTokens   int     `json:"max_tokens"`
	Vary        float64 `json:"vary"`
	KV          string  `json:"kv_type"` // the engine's KV cache element type
	PromptWords int     `json:"prompt_words"`
	SharedWords int     `json:"shared_words,omitempty"` // words of the system prompt every request starts with
	NoMmap      bool    `json:"no_mmap,omitempty"`      // the model file read into memory (--no-mmap)
	Round       int     `json:"round"`                  // 1, 2, … (--rounds)
	// SteadyTokensPerS is the rate while every stream had a request in flight: the tokens
	// that arrived from the end of the level's first request (the start burst of prompts
	// over) to the first moment a stream found no request left to send (the level's tail
	// begins), over that window's SteadySeconds; 0 when the level has no such window (no
	// more requests than streams).
	SteadyTokensPerS float64 `json:"steady_tokens_per_second"`
	SteadySeconds    float64 `json:"steady_seconds"`
}

// serveMedian is a line of `loom bench serve --rounds N`'s summary: an engine's medians at a
// number of streams over the rounds, and its rate there over its rate at the first level of
// the same round (the median, least and most of the rounds' ratios).
type serveMedian struct {
	Engine     string  `json:"engine"`
	Streams    int     `json:"streams"`
	Rounds     int     `json:"rounds"`
	TokensPerS float64 `json:"median_tokens_per_second"`
	TTFTp50Ms  float64 `json:"median_ttft_p50_ms"`
	ITLp50Ms   float64 `json:"median_itl_p50_ms"`
	Ratio      float64 `json:"median_ratio_to_first_level"`
	RatioMin   float64 `json:"least_ratio_to_first_level"`
	RatioMax   float64 `json:"most_ratio_to_first_level"`
	// The same for the steady rates (serveBench.SteadyTokensPerS), over the rounds where both
	// levels had one.
	SteadyTokensPerS float64 `json:"median_steady_tokens_per_second"`
	SteadyRatio      float64 `json:"median_steady_ratio_to_first_level"`
	SteadyRatioMin   float64 `json:"least_steady_ratio_to_first_level"`
	SteadyRatioMax   float64 `json:"most_steady_ratio_to_first_level"`
}

// medianOf returns the median of xs (the mean of the middle two for an even count).
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// serveMedians summarises rounds of results (each round the levels conc in order, per engine).
func serveMedians(results []serveBench, conc []int, rounds int) []serveMedian {
	var out []serveMedian
	for _, eng := range []string{"loom", "llama-server"} {
		// at[round][level]: the engine's result, if any
		at := map[[2]int]serveBench{}
		for _, r := range results {
			if r.Engine == eng {
				at[[2]int{r.Round, r.Streams}] = r
			}
		}
		for _, c := range conc {
			var rates, ttft, itl, ratios, steady, steadyRatios []float64
			for round := 1; round <= rounds; round++ {
				r, ok := at[[2]int{round, c}]
				if !ok {
					continue
				}
				rates, ttft, itl = append(rates, r.TokensPerS), append(ttft, r.TTFTp50Ms), append(itl, r.ITLp50Ms)
				if r.SteadyTokensPerS > 0 {
					steady = append(steady, r.SteadyTokensPerS)
				}
				first, ok := at[[2]int{round, conc[0]}]
				if ok && first.TokensPerS > 0 {
					ratios = append(ratios, r.TokensPerS/first.TokensPerS)
				}
				if ok && first.SteadyTokensPerS > 0 && r.SteadyTokensPerS > 0 {
					steadyRatios = append(steadyRatios, r.SteadyTokensPerS/first.SteadyTokensPerS)
				}
			}
			if len(rates) == 0 {
				continue
			}
			m := serveMedian{Engine: eng, Streams: c, Rounds: len(rates), TokensPerS: medianOf(rates), TTFTp50Ms: medianOf(ttft), ITLp50Ms: medianOf(itl)}
			if len(ratios) > 0 {
				m.Ratio, m.RatioMin, m.RatioMax = medianOf(ratios), slices.Min(ratios), slices.Max(ratios)
			}
			if len(steady) > 0 {
				m.SteadyTokensPerS = medianOf(steady)
			}
			if len(steadyRatios) > 0 {
				m.SteadyRatio, m.SteadyRatioMin, m.SteadyRatioMax = medianOf(steadyRatios), slices.Min(steadyRatios), slices.Max(steadyRatios)
			}
			out = append(out, m)
		}
	}
	return out
}

// serveLoad is what the clients of one level send: requests completions of tokens tokens on
// average (each request's own count spread over [tokens·(1−vary), tokens·(1+vary)]), each with
// a prompt of words words, streams at a time.
type serveLoad struct {
	streams, requests, tokens, words int
	shared                           int // words of a system prompt before every request's own
	vary                             float64
	kv                               string // both engines' KV cache element type
	noMmap                           bool   // both engines read the model file into memory
}

// tokensOf is request i's max_tokens: the same for every engine, spread evenly over the range
// by the golden ratio's sequence.
func (l serveLoad) tokensOf(i int) int {
	_, f := math.Modf(float64(i) * 0.6180339887498949)
	return max(1, int(math.Round(float64(l.tokens)*(1-l.vary+2*l.vary*f))))
}

// maxTokens is the most tokens a request of the level asks for.
func (l serveLoad) maxTokens() int {
	return int(math.Ceil(float64(l.tokens) * (1 + l.vary)))
}

// perSlot is the context of each of llama-server's slots, one a stream: room for a prompt of
// four tokens a word, the longest output and a margin. loom's KV cache gets the same room,
// streams × perSlot positions (loomKVBudgetMB), so that both engines hold as much.
func (l serveLoad) perSlot() int { return 4*(l.words+l.shared) + l.maxTokens() + 64 }

// kvBlocks is the size of a KV-cache block of a model: its positions and bytes.
type kvBlocks struct {
	size  int
	bytes int64
}

// kvBlocksOf opens model with KV cache elements of type kv and returns its cache's blocks
// (once a run: a level's budget is loomKVBudgetMB of them).
func kvBlocksOf(model, kv string) (kvBlocks, error) {
	t, err := cache.ParseDType(kv)
	if err != nil {
		return kvBlocks{}, err
	}
	m, err := llama.Open(model, llama.Options{KVType: t, NoPrefetch: true})
	if err != nil {
		return kvBlocks{}, err
	}
	defer m.Close()
	pool := m.Cache()
	return kvBlocks{size: pool.Config().BlockSize, bytes: pool.BlockBytes()}, nil
}

// loomKVBudgetMB is the kv_budget_mb that gives loom's cache streams × perSlot positions of
// blocks b, in whole blocks.
func loomKVBudgetMB(b kvBlocks, load serveLoad) int {
	blocks := load.streams * ((load.perSlot() + b.size - 1) / b.size)
	return int((int64(blocks)*b.bytes + 1<<20 - 1) >> 20)
}

// defaultLlamaServer is where the llama.cpp tool kit keeps llama-server beside a checkout.
const defaultLlamaServer = "../shared/tools/llama.cpp/bin/llama-server"

func runBenchServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench serve", `[flags]

Serves a GGUF file with loom serve and, where found, llama-server, each in a process of its
own, and drives each with N concurrent streaming clients per level (--concurrency). A line per
engine and level: tok/s is the level's generated tokens over its wall time; steady is the rate
while every stream was busy (from the end of the level's first request to the first moment a
stream found no request left; "—" without more requests than streams); TTFT and inter-token
latency are per request and per token. Both engines' KV caches hold the same positions: each
stream's room for its prompt and longest output (llama-server's slot context, loom's
kv_budget_mb).
`, stderr)
	modelFile := fs.String("model", "", "GGUF model to serve (default: the embedded default model, written to a temporary file)")
	levels := fs.String("concurrency", "1,4,16", "concurrent streams, comma-separated")
	requests := fs.Int("requests", 0, "requests per level (default: 4 × streams, at least 8)")
	maxTokens := fs.Int("n", 64, "tokens generated per request, on average (end of sequence ignored)")
	vary := fs.Float64("vary", 0.5, "spread of the requests' lengths: each asks for n·(1±vary) tokens, so that requests started together do not all end, and start again, together (0: every request n tokens)")
	words := fs.Int("prompt-words", 32, "words of each request's prompt (every prompt differs)")
	shared := fs.Int("shared-words", 0, "words of a system prompt that every request's prompt starts with, before its own words (0: none), which the engines' prefix caches can reuse")
	llamaServer := fs.String("llama-server", defaultLlamaServer, "llama-server binary to measure side by side, or none")
	jsonOut := fs.Bool("json", false, "print one JSON object per line")
	rounds := fs.Int("rounds", 1, "run the levels this many times, one round after another; with more than one, a summary follows: each engine's medians per level, and its rate there over its rate at the first level of the same round (median, least and most over the rounds); with --json, one object per engine and level, its fields named median_… and …_ratio_to_first_level")
	kv := fs.String("kv", "f16", "KV cache element type of both engines: f16 (llama-server's default), f32 or q8_0 (llama-server then runs with flash attention, which its quantized caches need)")
	noMmap := fs.Bool("no-mmap", false, "both engines read the model file into memory instead of mapping it (loom's mmap = false, llama-server's --no-mmap)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	kvType, err := cache.ParseDType(*kv)
	if err != nil {
		fmt.Fprintf(stderr, "loom bench serve: --kv %q: want f16, f32 or q8_0\n", *kv)
		return errUsage
	}
	*kv = kvType.String() // one name per type in the results ("float16" is "f16")
	var conc []int
	for _, f := range strings.Split(*levels, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > 256 {
			fmt.Fprintf(stderr, "loom bench serve: --concurrency %q: want numbers in [1, 256]\n", *levels)
			return errUsage
		}
		conc = append(conc, c)
	}
	for _, bad := range []struct {
		ok   bool
		flag string
		val  any
		want string
	}{
		{*maxTokens >= 1, "-n", *maxTokens, "at least 1"},
		{*words >= 1, "--prompt-words", *words, "at least 1"},
		{*shared >= 0, "--shared-words", *shared, "not negative"},
		{*requests >= 0, "--requests", *requests, "not negative"},
		{*vary >= 0 && *vary < 1, "--vary", *vary, "in [0, 1)"},
		{*rounds >= 1, "--rounds", *rounds, "at least 1"},
	} {
		if !bad.ok {
			fmt.Fprintf(stderr, "loom bench serve: %s %v: must be %s\n", bad.flag, bad.val, bad.want)
			return errUsage
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	path := *modelFile
	if path == "" {
		dir, err := os.MkdirTemp("", "loom-bench-serve-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "default.gguf")
		if err := os.WriteFile(path, models.GGUF("default"), 0o644); err != nil {
			return err
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	blocks, err := kvBlocksOf(abs, *kv)
	if err != nil {
		return fmt.Errorf("--model %s: %w", path, err)
	}
	var llama string
	if *llamaServer != "none" {
		if _, err := os.Stat(*llamaServer); err != nil {
			if *llamaServer != defaultLlamaServer {
				return fmt.Errorf("--llama-server %s: %v", *llamaServer, err)
			}
			fmt.Fprintf(stderr, "loom bench serve: %s not found: measuring loom only\n", defaultLlamaServer)
		} else {
			llama = *llamaServer
		}
	}

	if !*jsonOut {
		fmt.Fprintf(stdout, "| %-12s | %7s | %9s | %9s | %10s | %10s | %10s | %10s | %6s |\n", "engine", "streams", "tok/s", "steady", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "errors")
		fmt.Fprintln(stdout, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	}
	report := func(r serveBench) error {
		if *jsonOut {
			return json.NewEncoder(stdout).Encode(r)
		}
		_, err := fmt.Fprintf(stdout, "| %-12s | %7d | %9.1f | %9s | %7.1f ms | %7.1f ms | %7.1f ms | %7.1f ms | %6d |\n",
			r.Engine, r.Streams, r.TokensPerS, orDash(r.SteadyTokensPerS, "%.1f"), r.TTFTp50Ms, r.TTFTp99Ms, r.ITLp50Ms, r.ITLp99Ms, r.Errors)
		return err
	}
	var results []serveBench
	for round := 1; round <= *rounds; round++ {
		for i, c := range conc {
			n := *requests
			if n == 0 {
				n = max(8, 4*c)
			}
			// Alternate which engine goes first from one level (and round) to the next.
			engines := []string{"loom", "llama-server"}
			if (i+round-1)%2 == 1 {
				engines = []string{"llama-server", "loom"}
			}
			for _, eng := range engines {
				if eng == "llama-server" && llama == "" {
					continue
				}
				var r serveBench
				var err error
				load := serveLoad{streams: c, requests: n, tokens: *maxTokens, words: *words, shared: *shared, vary: *vary, kv: *kv, noMmap: *noMmap}
				if eng == "loom" {
					r, err = benchLoomServe(ctx, abs, blocks, load)
				} else {
					r, err = benchLlamaServer(ctx, llama, abs, load)
				}
				if err != nil {
					if ctx.Err() != nil {
						return &exitError{code: 130, err: errors.New("interrupted")}
					}
					return fmt.Errorf("%s at %d streams: %w", eng, c, err)
				}
				r.ModelFile, r.MaxTokens, r.Vary, r.PromptWords, r.SharedWords = filepath.Base(abs), *maxTokens, *vary, *words, *shared
				r.KV, r.Round, r.NoMmap = *kv, round, *noMmap
				if err := report(r); err != nil {
					return err
				}
				results = append(results, r)
			}
		}
	}
	if *rounds == 1 {
		return nil
	}
	medians := serveMedians(results, conc, *rounds)
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		for _, m := range medians {
			if err := enc.Encode(m); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(stdout, "\nmedians of %d rounds; rates over the same round's %d-stream rates (median, least–most):\n\n", *rounds, conc[0])
	fmt.Fprintf(stdout, "| %-12s | %7s | %9s | %9s | %10s | %10s | %s | %s |\n", "engine", "streams", "tok/s", "steady", "TTFT p50", "ITL p50", "× first level", "steady × first level")
	fmt.Fprintln(stdout, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, m := range medians {
		steadyRatio := "—"
		if m.SteadyRatio > 0 {
			steadyRatio = fmt.Sprintf("%.2f× (%.2f–%.2f)", m.SteadyRatio, m.SteadyRatioMin, m.SteadyRatioMax)
		}
		if _, err := fmt.Fprintf(stdout, "| %-12s | %7d | %9.1f | %9s | %7.1f ms | %7.1f ms | %.2f× (%.2f–%.2f) | %s |\n",
			m.Engine, m.Streams, m.TokensPerS, orDash(m.SteadyTokensPerS, "%.1f"), m.TTFTp50Ms, m.ITLp50Ms, m.Ratio, m.RatioMin, m.RatioMax, steadyRatio); err != nil {
			return err
		}
	}
	return nil
}

// orDash formats a positive v with format, and anything else as "—" (not measured).
func orDash(v float64, format string) string {
	if v <= 0 {
		return "—"
	}
	return fmt.Sprintf(format, v)
}

// freeAddr returns a free loopback address.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// benchLoomServe serves the model with `loom serve` in a process of its own (greedy, end of
// sequence ignored, streams running at once) and drives it. The server runs apart from the
// clients, as llama-server does: in one process, a client's goroutines waiting on the network
// saw the tokens late while the server's pool spun through a step (its spinning workers keep
// the scheduler from polling the network), so that tokens sent apart arrived together.
func benchLoomServe(ctx context.Context, model string, blocks kvBlocks, load serveLoad) (serveBench, error) {
	mmap := ""
	if load.noMmap {
		mmap = "mmap = false\n"
	}
	budget := loomKVBudgetMB(blocks, load)
	src := fmt.Sprintf("[model]\npath = %q\nkv_type = %q\nkv_budget_mb = %d\n%s\n[generation]\nmax_new_tokens = %d\nignore_eos = true\n\n[strategy]\ntype = \"greedy\"\n", model, load.kv, budget, mmap, load.maxTokens())
	if _, err := pipeline.Parse("bench.toml", []byte(src)); err != nil {
		return serveBench{}, err
	}
	bin, err := os.Executable()
	if err != nil {
		return serveBench{}, fmt.Errorf("finding loom's own binary to run loom serve: %w", err)
	}
	dir, err := os.MkdirTemp("", "loom-bench-serve-")
	if err != nil {
		return serveBench{}, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "bench.toml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		return serveBench{}, err
	}
	addr, err := freeAddr()
	if err != nil {
		return serveBench{}, err
	}
	cmd := exec.CommandContext(ctx, bin, "serve", file, "--addr", addr,
		"--max-running", strconv.Itoa(load.streams), "--max-queue", strconv.Itoa(load.requests))
	stop, err := startServer(ctx, "loom serve", cmd, "http://"+addr+"/health")
	if err != nil {
		return serveBench{}, err
	}
	defer stop()
	r := drive(ctx, "http://"+addr, "bench", false, load)
	r.Engine = "loom"
	return r, nil
}

// startServer starts cmd, a server, and waits until health answers 200; stop ends it
// (SIGTERM, then a kill after 10 s). A server that does not start is an error holding its
// output.
func startServer(ctx context.Context, name string, cmd *exec.Cmd, health string) (stop func(), err error) {
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs // one writer: one goroutine copies both
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	if err := waitReady(ctx, health, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%s did not start: %v\n%s", name, err, logs.String())
	}
	return stop, nil
}

// benchLlamaServer runs llama-server on the same file with streams slots (continuous
// batching, 2 threads) and drives it the same way.
func benchLlamaServer(ctx context.Context, bin, model string, load serveLoad) (serveBench, error) {
	addr, err := freeAddr()
	if err != nil {
		return serveBench{}, err
	}
	host, port, _ := net.SplitHostPort(addr)
	perSlot := load.perSlot()
	cmd := exec.CommandContext(ctx, bin, "-m", model, "--host", host, "--port", port, "-np", strconv.Itoa(load.streams), "-cb",
		"-t", "2", "-c", strconv.Itoa(load.streams*perSlot), "-ctk", load.kv, "-ctv", load.kv)
	if load.kv == cache.Q8_0.String() {
		cmd.Args = append(cmd.Args, "-fa") // llama.cpp's quantized V cache needs flash attention
	}
	if load.noMmap {
		cmd.Args = append(cmd.Args, "--no-mmap")
	}
	stop, err := startServer(ctx, "llama-server", cmd, "http://"+addr+"/health")
	if err != nil {
		return serveBench{}, err
	}
	defer stop()
	r := drive(ctx, "http://"+addr, "model", true, load)
	r.Engine = "llama-server"
	return r, nil
}

func waitReady(ctx context.Context, url string, exited <-chan struct{}) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-exited:
			return errors.New("the server exited")
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after 2 minutes", url)
}

// serveBenchPrompt is request i's prompt: a system prompt of shared words, the same for every
// request, then words words different for every request, so that no engine reuses another
// request's prefix past the system prompt.
func serveBenchPrompt(i, words, shared int) string {
	base := strings.Fields("and it came to pass when the king had heard these words that he rent his clothes and sat upon the ground and the men of the city")
	var b strings.Builder
	if shared > 0 {
		b.WriteString("System:")
		for w := range shared {
			b.WriteByte(' ')
			b.WriteString(base[(w*5)%len(base)])
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Request %d:", i)
	for w := 0; w < words; w++ {
		b.WriteByte(' ')
		b.WriteString(base[(i*7+w)%len(base)])
	}
	return b.String()
}

// drive sends requests streaming completions, streams at a time, and measures them.
func drive(ctx context.Context, url, model string, llamaExtras bool, load serveLoad) serveBench {
	streams, requests := load.streams, load.requests
	results := make([]requestTiming, requests)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var drained time.Time // the first moment a stream found no request left to send
	start := time.Now()
	for w := 0; w < streams; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				body := map[string]any{"model": model, "prompt": serveBenchPrompt(i, load.words, load.shared), "max_tokens": load.tokensOf(i), "stream": true}
				if llamaExtras { // greedy, end of sequence ignored, as loom's bench pipeline
					body["ignore_eos"], body["temperature"] = true, 0
				}
				res := &results[i]
				res.sent = time.Now()
				res.arrivals, res.err = streamOne(ctx, url, body)
				res.ended = time.Now()
			}
			mu.Lock()
			if drained.IsZero() {
				drained = time.Now()
			}
			mu.Unlock()
		}()
	}
	for i := 0; i < requests && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return levelStats(streams, results, drained, time.Since(start))
}

// requestTiming is one request of a level: when it was sent, when each of its tokens arrived,
// when its stream ended, and its error if any.
type requestTiming struct {
	sent, ended time.Time
	arrivals    []time.Time
	err         error
}

// levelStats summarises a level of streams streams whose requests took wall from the first
// sent, the first stream to find no request left doing so at drained: the rate over wall, the
// steady rate (serveBench.SteadyTokensPerS: the tokens that arrived after the first request's
// end and by drained, over that window), TTFT and inter-token latencies.
func levelStats(streams int, results []requestTiming, drained time.Time, wall time.Duration) serveBench {
	r := serveBench{Streams: streams, Requests: len(results), Seconds: wall.Seconds()}
	var firstEnd time.Time
	for _, res := range results {
		if !res.ended.IsZero() && (firstEnd.IsZero() || res.ended.Before(firstEnd)) {
			firstEnd = res.ended
		}
	}
	var ttfts, itls []float64
	steady := 0
	for _, res := range results {
		if res.err != nil {
			if r.Errors++; r.FirstError == "" {
				r.FirstError = res.err.Error()
			}
			continue
		}
		r.Tokens += len(res.arrivals)
		for k, t := range res.arrivals {
			if k == 0 {
				ttfts = append(ttfts, float64(t.Sub(res.sent).Microseconds())/1000)
			} else {
				itls = append(itls, float64(t.Sub(res.arrivals[k-1]).Microseconds())/1000)
			}
			if t.After(firstEnd) && !t.After(drained) {
				steady++
			}
		}
	}
	r.TokensPerS = float64(r.Tokens) / wall.Seconds()
	if window := drained.Sub(firstEnd); window > 0 && !firstEnd.IsZero() && r.Errors == 0 {
		r.SteadySeconds, r.SteadyTokensPerS = window.Seconds(), float64(steady)/window.Seconds()
	}
	r.TTFTp50Ms, r.TTFTp99Ms = quantile(ttfts, 0.5), quantile(ttfts, 0.99)
	r.ITLp50Ms, r.ITLp99Ms = quantile(itls, 0.5), quantile(itls, 0.99)
	return r
}

// benchClient opens a connection per request: llama-server closes idle keep-alive connections
// in ways Go's client can race with, and each engine gets the same treatment.
var benchClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// streamOne sends one streaming completion and returns when each of its tokens arrived: each
// chunk with text is a token (both engines stream one token per chunk).
func streamOne(ctx context.Context, url string, body map[string]any) (arrivals []time.Time, err error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := benchClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return arrivals, fmt.Errorf("chunk %q: %v", data, err)
		}
		if chunk.Error != nil {
			return arrivals, errors.New(chunk.Error.Message)
		}
		if len(chunk.Choices) == 0 || chunk.Choices[0].Text == "" {
			continue
		}
		arrivals = append(arrivals, time.Now())
	}
	return arrivals, sc.Err()
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(i, len(s)-1)]
}
