package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/model/kernels"
	"github.com/loomlm/loom/model/llama"
)

// versusResult is one file's side-by-side figures: per test, loom's and llama-bench's
// tokens/s of every round and their medians.
type versusResult struct {
	Model      string    `json:"model"`
	Type       string    `json:"type"`
	Test       string    `json:"test"`
	Loom       []float64 `json:"loom_tokens_per_second"`
	LlamaCpp   []float64 `json:"llamacpp_tokens_per_second"`
	LoomMedian float64   `json:"loom_median"`
	LlamaMed   float64   `json:"llamacpp_median"`
	Ratio      float64   `json:"ratio"`
}

// benchVersusLlamaCpp measures every file with loom and with llama-bench in alternation:
// f.alternate rounds, each one repetition of loom's prompt and generation tests (each after a
// warm-up, as llama-bench warms up in every run) followed by one llama-bench run of the same
// tests on the same file with the same threads and KV cache type; it prints the medians and
// their ratios.
func benchVersusLlamaCpp(ctx context.Context, f benchFlags, kvType cache.DType, paths, labels []string, stdout, stderr io.Writer) error {
	threads := runtime.GOMAXPROCS(0)
	if !f.jsonOut {
		fmt.Fprintf(stdout, "| %-22s | %-12s | %-6s | %9s | %9s | %6s |\n", "model", "weights", "test", "loom t/s", "llama.cpp", "ratio")
		fmt.Fprintf(stdout, "| %s | ------------ | ------ | --------: | --------: | -----: |\n", "----------------------")
	}
	for i, path := range paths {
		m, err := llama.Open(path, llama.Options{KVType: kvType, NoPrefixCache: true, BatchTokens: max(f.prompt, 1), NoMmap: f.noMmap})
		if err != nil {
			return err
		}
		label := labels[i]
		if label == "" {
			label = strings.TrimSuffix(filepath.Base(path), ".gguf")
		}
		type test struct {
			name string
			n    int
			run  func(context.Context, *llama.Model, int) (time.Duration, error)
			res  versusResult
		}
		tests := []*test{
			{name: fmt.Sprintf("pp%d", f.prompt), n: f.prompt, run: benchPrompt},
			{name: fmt.Sprintf("tg%d", f.gen), n: f.gen, run: benchGenerate},
		}
		for range f.alternate {
			for ti, t := range tests {
				if t.n == 0 {
					continue
				}
				// A warm-up in every round, as llama-bench makes one in each run: the
				// prompt test at full size (its buffers), the generation test briefly.
				warm := t.n
				if ti == 1 {
					warm = min(t.n, 16)
				}
				if _, err := t.run(ctx, m, warm); err != nil {
					m.Close()
					return err
				}
				d, err := t.run(ctx, m, t.n)
				if err != nil {
					m.Close()
					return err
				}
				t.res.Loom = append(t.res.Loom, float64(t.n)/d.Seconds())
			}
			pp, tg, err := runLlamaBench(ctx, f.llamaBench, path, f.prompt, f.gen, threads, f.kv, f.noMmap)
			if err != nil {
				m.Close()
				return err
			}
			tests[0].res.LlamaCpp = append(tests[0].res.LlamaCpp, pp)
			tests[1].res.LlamaCpp = append(tests[1].res.LlamaCpp, tg)
		}
		for _, t := range tests {
			if t.n == 0 {
				continue
			}
			r := &t.res
			r.Model, r.Type, r.Test = label, weightType(m), t.name
			r.LoomMedian, r.LlamaMed = median(r.Loom), median(r.LlamaCpp)
			r.Ratio = r.LoomMedian / r.LlamaMed
			if f.jsonOut {
				if err := json.NewEncoder(stdout).Encode(r); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(stdout, "| %-22s | %-12s | %-6s | %9.1f | %9.1f | %5.2f× |\n", truncate(label, 22), truncate(r.Type, 12), t.name, r.LoomMedian, r.LlamaMed, r.Ratio)
		}
		m.Close()
	}
	if !f.jsonOut {
		fmt.Fprintf(stdout, "\nmedians of %d rounds, loom then llama-bench (-r 1) per round; %d threads, %s kernels, KV cache %s\n",
			f.alternate, threads, kernels.Implementation(), f.kv)
	}
	return nil
}

// runLlamaBench runs llama-bench once on path and returns its prompt and generation
// tokens/s.
func runLlamaBench(ctx context.Context, bin, path string, prompt, gen, threads int, kv string, noMmap bool) (pp, tg float64, err error) {
	cmd := exec.CommandContext(ctx, bin, "-m", path, "-p", strconv.Itoa(prompt), "-n", strconv.Itoa(gen),
		"-t", strconv.Itoa(threads), "-r", "1", "-ctk", kv, "-ctv", kv, "-o", "jsonl")
	if kv == cache.Q8_0.String() {
		cmd.Args = append(cmd.Args, "-fa", "1") // llama.cpp's quantized V cache needs flash attention
	}
	if noMmap {
		cmd.Args = append(cmd.Args, "-mmp", "0")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("%s on %s: %v\n%s", bin, path, err, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var line struct {
			NPrompt int     `json:"n_prompt"`
			NGen    int     `json:"n_gen"`
			AvgTS   float64 `json:"avg_ts"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch {
		case line.NPrompt > 0 && line.NGen == 0:
			pp = line.AvgTS
		case line.NGen > 0 && line.NPrompt == 0:
			tg = line.AvgTS
		}
	}
	if (prompt > 0 && pp == 0) || (gen > 0 && tg == 0) {
		return 0, 0, fmt.Errorf("%s on %s: no pp%d/tg%d result in its output:\n%s", bin, path, prompt, gen, out)
	}
	return pp, tg, nil
}
