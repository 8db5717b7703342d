package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/kernels"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/model/loader"
)

func init() {
	register(&command{
		name:    "bench",
		summary: "measure prompt processing and generation speed (tokens/s) of GGUF models, like llama-bench; `bench strategy PIPELINE.toml` times a pipeline's strategy against greedy; `bench serve` measures loom serve (and llama-server) under concurrent streams",
		run:     runBench,
	})
}

type benchFlags struct {
	synthetic, types, keep, kv string
	prompt, gen, reps          int
	jsonOut, noMmap            bool
	llamaBench                 string
	alternate                  int
}

// benchResult is one line of `loom bench` output.
type benchResult struct {
	Model      string    `json:"model"`
	Type       string    `json:"type"`
	SizeBytes  int64     `json:"size_bytes"`
	Params     int64     `json:"params"`
	KV         string    `json:"kv_type"`
	Test       string    `json:"test"`
	Tokens     int       `json:"tokens"`
	TokensPerS float64   `json:"tokens_per_second"`
	StdDev     float64   `json:"stddev"`
	Samples    []float64 `json:"samples"`
	KVPerToken int64     `json:"kv_bytes_per_token"`
	Threads    int       `json:"threads"`
	Kernels    string    `json:"kernels"`
}

func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "strategy" {
		return runBenchStrategy(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "serve" {
		return runBenchServe(args[1:], stdout, stderr)
	}
	var f benchFlags
	fs := newFlagSet("bench", "[flags] [MODEL.gguf ...]", stderr)
	fs.StringVar(&f.synthetic, "synthetic", "", "benchmark a model of this shape with random weights instead of files ("+strings.Join(llama.ShapeNames(), ", ")+")")
	fs.StringVar(&f.types, "type", "q8_0", "storage types of the synthetic model, comma-separated ("+strings.Join(llama.SyntheticTypes, ", ")+")")
	fs.StringVar(&f.keep, "keep", "", "keep the synthetic model files in this directory (and reuse them from there)")
	fs.StringVar(&f.kv, "kv", "f16", "KV cache element type: f16 (as llama-bench), f32 or q8_0 (llama-bench then runs with flash attention, which its quantized caches need)")
	fs.IntVar(&f.prompt, "p", 128, "prompt tokens of the prompt-processing test (0 skips it)")
	fs.IntVar(&f.gen, "n", 128, "tokens of the generation test (0 skips it)")
	fs.IntVar(&f.reps, "r", 3, "repetitions of each test")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object per result")
	fs.BoolVar(&f.noMmap, "no-mmap", false, "read the model files into memory (on Linux on transparent huge pages) instead of mapping them; llama-bench gets -mmp 0")
	fs.StringVar(&f.llamaBench, "llama-bench", "", "run this llama-bench on the same files, alternating with loom, and print the ratios")
	fs.IntVar(&f.alternate, "alternate", 5, "with --llama-bench: rounds of loom then llama-bench per file (medians are reported)")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	kvType, err := cache.ParseDType(f.kv)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "loom bench: --kv %q: want f16, f32 or q8_0\n", f.kv)
		return errUsage
	case f.prompt < 0 || f.gen < 0 || f.reps < 1:
		fmt.Fprintln(stderr, "loom bench: -p and -n must not be negative, -r must be at least 1")
		return errUsage
	case (f.synthetic == "") == (len(paths) == 0):
		fmt.Fprintln(stderr, "loom bench: give model files or --synthetic SHAPE (not both)")
		return errUsage
	case f.alternate < 1:
		fmt.Fprintln(stderr, "loom bench: --alternate must be at least 1")
		return errUsage
	}
	f.kv = kvType.String() // one name per type in the results and for llama-bench ("float16" is "f16")

	// Ctrl-C or SIGTERM stops the benchmark cleanly, so that the deferred removal of the
	// temporary synthetic models runs.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	interrupted := func(err error) error {
		if ctx.Err() != nil {
			return &exitError{code: 130, err: errors.New("interrupted")}
		}
		return err
	}

	type target struct{ path, label, typ string }
	var targets []target
	if f.synthetic != "" {
		shape, ok := llama.Shapes[f.synthetic]
		if !ok {
			return fmt.Errorf("--synthetic %q: unknown shape (known: %s)", f.synthetic, strings.Join(llama.ShapeNames(), ", "))
		}
		dir := f.keep
		if dir == "" {
			if dir, err = os.MkdirTemp("", "loom-bench-"); err != nil {
				return err
			}
			defer os.RemoveAll(dir)
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		var types []string
		for _, typ := range strings.Split(f.types, ",") {
			typ = strings.ToLower(strings.TrimSpace(typ))
			if !slices.Contains(llama.SyntheticTypes, typ) { // before any file is written
				return fmt.Errorf("--type %q: want one of %s", typ, strings.Join(llama.SyntheticTypes, ", "))
			}
			types = append(types, typ)
		}
		for _, typ := range types {
			path := filepath.Join(dir, fmt.Sprintf("%s-%s.gguf", f.synthetic, typ))
			if err := writeSyntheticFile(ctx, path, shape, typ, f.keep != "", stderr); err != nil {
				return interrupted(err)
			}
			targets = append(targets, target{path, f.synthetic, strings.ToUpper(typ)})
		}
	} else {
		for _, p := range paths {
			targets = append(targets, target{p, "", ""})
		}
	}

	if f.llamaBench != "" {
		var paths, labels []string
		for _, tg := range targets {
			paths = append(paths, tg.path)
			labels = append(labels, strings.TrimSpace(tg.label+" "+tg.typ))
		}
		return interrupted(benchVersusLlamaCpp(ctx, f, kvType, paths, labels, stdout, stderr))
	}
	if !f.jsonOut {
		fmt.Fprintf(stdout, "| %-28s | %10s | %8s | %-4s | %-6s | %16s |\n", "model", "size", "params", "kv", "test", "t/s")
		fmt.Fprintf(stdout, "| %s | %s: | %s: | %s | %s | %s: |\n", strings.Repeat("-", 28), strings.Repeat("-", 9), strings.Repeat("-", 7), "----", "------", strings.Repeat("-", 15))
	}
	var kvPerToken int64
	for _, tg := range targets {
		opts := llama.Options{KVType: kvType, NoPrefixCache: true, BatchTokens: max(f.prompt, 1), NoMmap: f.noMmap}
		if loader.IsTerminal(os.Stderr) {
			opts.Progress = loader.TerminalProgress(stderr, filepath.Base(tg.path))
		}
		m, err := llama.Open(tg.path, opts)
		if err != nil {
			return err
		}
		p := m.Params()
		label, typ := tg.label, tg.typ
		if label == "" {
			label = p.Name
			if label == "" {
				label = filepath.Base(tg.path)
			}
			typ = weightType(m)
		}
		var params int64
		for i := range m.File().Tensors {
			params += m.File().Tensors[i].Elements()
		}
		if need := max(f.prompt, f.gen); need > p.ContextLength {
			m.Close()
			return fmt.Errorf("%s: %d tokens exceed the context length %d", tg.path, need, p.ContextLength)
		}
		tests := []struct {
			name string
			n    int
			run  func(context.Context, *llama.Model, int) (time.Duration, error)
		}{
			{fmt.Sprintf("pp%d", f.prompt), f.prompt, benchPrompt},
			{fmt.Sprintf("tg%d", f.gen), f.gen, benchGenerate},
		}
		for _, test := range tests {
			if test.n == 0 {
				continue
			}
			if _, err := test.run(ctx, m, min(test.n, 16)); err != nil { // warm-up
				m.Close()
				return interrupted(err)
			}
			res := benchResult{
				Model: label, Type: typ, SizeBytes: m.WeightBytes(), Params: params, KV: f.kv,
				Test: test.name, Tokens: test.n, KVPerToken: m.Cache().BytesPerToken(),
				Threads: runtime.GOMAXPROCS(0), Kernels: kernels.Implementation(),
			}
			for range f.reps {
				d, err := test.run(ctx, m, test.n)
				if err != nil {
					m.Close()
					return interrupted(err)
				}
				res.Samples = append(res.Samples, float64(test.n)/d.Seconds())
			}
			res.TokensPerS, res.StdDev = meanStd(res.Samples)
			if f.jsonOut {
				if err := json.NewEncoder(stdout).Encode(res); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(stdout, "| %-28s | %6.1f MiB | %6.1f M | %-4s | %-6s | %7.1f ± %6.1f |\n",
				truncate(res.Model+" "+res.Type, 28), float64(res.SizeBytes)/(1<<20), float64(res.Params)/1e6,
				res.KV, res.Test, res.TokensPerS, res.StdDev)
		}
		kvPerToken = m.Cache().BytesPerToken()
		m.Close()
	}
	if !f.jsonOut {
		fmt.Fprintf(stdout, "\nKV cache (%s): %.1f KiB per token", f.kv, float64(kvPerToken)/1024)
		if len(targets) > 1 {
			fmt.Fprint(stdout, " (last model)")
		}
		fmt.Fprintf(stdout, "; %d threads, %s kernels; pp: one forward pass over the prompt; tg: one token per forward pass from an empty context\n",
			runtime.GOMAXPROCS(0), kernels.Implementation())
	}
	return nil
}

// writeSyntheticFile writes a synthetic model to path, or keeps an existing file when reuse
// is set. Cancelling ctx stops the writing and removes the partial file.
func writeSyntheticFile(ctx context.Context, path string, shape llama.Shape, typ string, reuse bool, stderr io.Writer) error {
	if reuse {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	fmt.Fprintf(stderr, "writing %s (%.1f M parameters, %s)…\n", path, float64(shape.Params())/1e6, typ)
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(ctxWriter{ctx, fh}, 1<<20)
	err = llama.WriteSynthetic(w, shape, typ, 1)
	if err == nil {
		err = w.Flush()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// ctxWriter fails its writes once ctx is cancelled.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// benchTokens returns n pseudo-random token ids of the model's vocabulary (past the specials).
func benchTokens(m *llama.Model, n int) []int32 {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	v := m.Params().VocabSize
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(3 + r.IntN(max(v-3, 1)))
	}
	return ids
}

// benchPrompt times one forward pass over n prompt tokens in a fresh sequence.
func benchPrompt(ctx context.Context, m *llama.Model, n int) (time.Duration, error) {
	st, err := m.NewState()
	if err != nil {
		return 0, err
	}
	defer st.Close()
	toks := benchTokens(m, n)
	start := time.Now()
	err = m.Forward(ctx, []core.ForwardItem{{State: st, Tokens: toks}})
	return time.Since(start), err
}

// benchGenerate times n forward passes of one token each, from an empty sequence.
func benchGenerate(ctx context.Context, m *llama.Model, n int) (time.Duration, error) {
	st, err := m.NewState()
	if err != nil {
		return 0, err
	}
	defer st.Close()
	toks := benchTokens(m, n)
	batch := make([]core.ForwardItem, 1)
	start := time.Now()
	for _, tok := range toks {
		batch[0] = core.ForwardItem{State: st, Tokens: []int32{tok}}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := m.Forward(ctx, batch); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func meanStd(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)-1))
}

// weightType names the storage type of most of a model's weight bytes ("Q8_0"), or lists the
// two largest for a mixture.
func weightType(m *llama.Model) string {
	bytes := map[string]int64{}
	for i := range m.File().Tensors {
		t := &m.File().Tensors[i]
		if len(t.Dims) == 2 {
			bytes[t.Type.String()] += t.Size
		}
	}
	first, second := "", ""
	for name, n := range bytes {
		switch {
		case first == "" || n > bytes[first]:
			first, second = name, first
		case second == "" || n > bytes[second]:
			second = name
		}
	}
	if second != "" && bytes[second]*10 > bytes[first] {
		return first + "+" + second
	}
	if first == "" {
		return "?"
	}
	return first
}

func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
