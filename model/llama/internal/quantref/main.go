// Command quantref writes the llama.cpp reference fixtures of loom's quantised-weight tests
// (testdata/llamacpp-quant): small random-weight llama models quantised by llama.cpp's
// llama-quantize, and the greedy token ids and logits llama.cpp computes on them.
//
// For every model of the table below it writes the model with loom's WriteSynthetic as F32 to
// a temporary folder, runs
//
//	llama-quantize BASE.gguf NAME-TYPE.gguf TYPE THREADS
//
// for every type, and then, on every quantised file,
//
//	greedy-ids NAME-TYPE.gguf POSITIONS -ids "PROMPT" -kvf32 -t THREADS -logits NAME-TYPE.logits.f32
//
// keeping its standard output as NAME-TYPE.txt (the lines "PROMPT ids" and "GEN ids"). The
// quantised files, the .txt and the .logits.f32 files go to -out; the F32 files are removed
// unless -keep-f32 is given.
// llama-quantize and greedy-ids come from -llamacpp, a folder with the layout of loom's
// llama.cpp tool kit (bin/llama-quantize, bin/greedy-ids), and run from an empty folder so that
// they load the CPU backend of their own bin/.
//
// -set arch writes the architecture fixtures (testdata/llamacpp-arch) instead: one small model
// of every architecture variant llama.cpp and loom share, as F32 and quantised.
//
// Usage, from the repository root (the whole run holds the shared CPU lock):
//
//	flock /tmp/loom-cpu.lock go run ./model/llama/internal/quantref -llamacpp DIR -out testdata/llamacpp-quant
//	flock /tmp/loom-cpu.lock go run ./model/llama/internal/quantref -llamacpp DIR -set arch -out testdata/llamacpp-arch
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/loomlm/loom/model/llama"
)

// fixture is one random-weight model and the llama-quantize types made of it.
type fixture struct {
	name  string
	shape llama.Shape
	seed  uint64
	types []string // llama-quantize type names
}

// The models. Row widths are multiples of 32 for Q8_0 and Q4_0; "wide" has rows of 256 so that
// llama-quantize keeps its K-quants (and, for Q4_0, gives the output matrix Q6_K, as it does
// for real models) instead of falling back to other types. F16 gets the smallest model: its
// files are the largest.
var fixtures = []fixture{
	{
		name:  "narrow",
		shape: llama.Shape{Architecture: "llama", Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 256, VocabSize: 320, ContextLength: 128},
		seed:  7,
		types: []string{"Q8_0", "Q4_0"},
	},
	{
		name:  "wide",
		shape: llama.Shape{Architecture: "llama", Dim: 256, Layers: 1, Heads: 4, KVHeads: 2, FFNDim: 256, VocabSize: 288, ContextLength: 128},
		seed:  11,
		types: []string{"Q4_0", "Q4_K_M", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K_M", "Q5_K_M", "IQ4_XS"},
	},
	{
		name:  "tiny",
		shape: llama.Shape{Architecture: "llama", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 128, VocabSize: 272, ContextLength: 128},
		seed:  13,
		types: []string{"F16"},
	},
}

// archFixtures are the architecture variants: Mixtral-style mixture of experts (arch llama with
// experts), qwen2moe (routed experts and a sigmoid-gated shared expert) and Llama 3.1's per-pair
// RoPE frequency factors. "F32" keeps the written file as it is.
var archFixtures = []fixture{
	{
		name:  "mixtral",
		shape: llama.Shape{Architecture: "llama", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 64, VocabSize: 272, ContextLength: 128, Experts: 4, ExpertsUsed: 2},
		seed:  21,
		types: []string{"F32", "Q8_0"},
	},
	{
		name:  "qwen2moe",
		shape: llama.Shape{Architecture: "qwen2moe", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 64, VocabSize: 272, ContextLength: 128, RopeBase: 1e6, Experts: 4, ExpertsUsed: 2, SharedFFNDim: 96},
		seed:  23,
		types: []string{"F32", "Q8_0"},
	},
	{
		name:  "llama3",
		shape: llama.Shape{Architecture: "llama", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 128, VocabSize: 272, ContextLength: 128, RopeBase: 500000, Llama3Rope: true},
		seed:  25,
		types: []string{"F32"},
	},
	{
		name:  "phi3",
		shape: llama.Shape{Architecture: "phi3", Dim: 64, Layers: 2, Heads: 4, KVHeads: 4, FFNDim: 128, VocabSize: 272, ContextLength: 128, LongRope: true, SlidingWindow: 128},
		seed:  27,
		types: []string{"F32", "Q8_0"},
	},
	{
		// Soft caps far below Gemma 2's 50 and 30, and a window of 8, so that a 48-position
		// run depends on them. 26 layers: llama.cpp at this commit takes the attention scale
		// from the model size it infers from the layer count, and knows only 26, 42 and 46.
		name:  "gemma2",
		shape: llama.Shape{Architecture: "gemma2", Dim: 32, Layers: 26, Heads: 2, KVHeads: 1, FFNDim: 64, VocabSize: 272, ContextLength: 128, Tied: true, AttnSoftcap: 0.05, FinalSoftcap: 0.5, SlidingWindow: 8},
		seed:  29,
		types: []string{"F32", "Q8_0"},
	},
}

// prompt is the prompt of every run (BOS, then ids of the made-up pieces and byte tokens).
var prompt = []int{1, 268, 265, 17, 270, 42, 271, 260}

// steps is the number of greedy tokens llama.cpp generates after the prompt.
const steps = 40

func main() {
	llamacpp := flag.String("llamacpp", os.Getenv("LLAMACPP"), "folder of the llama.cpp tool kit (bin/llama-quantize, bin/greedy-ids); default $LLAMACPP")
	out := flag.String("out", "", "folder to write the fixtures to (created if absent)")
	threads := flag.Int("threads", 2, "threads llama.cpp uses")
	keep := flag.Bool("keep-f32", false, "keep the F32 models in -out too (for experiments; the tests do not read them)")
	set := flag.String("set", "quant", "which fixtures: quant (tensor types) or arch (architectures)")
	flag.Parse()
	fx := fixtures
	switch *set {
	case "quant":
	case "arch":
		fx = archFixtures
	default:
		fmt.Fprintf(os.Stderr, "quantref: -set %q: want quant or arch\n", *set)
		os.Exit(2)
	}
	if err := run(fx, *llamacpp, *out, *threads, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "quantref:", err)
		os.Exit(1)
	}
}

func run(fixtures []fixture, llamacpp, out string, threads int, keep bool) error {
	if llamacpp == "" || out == "" {
		return fmt.Errorf("need -llamacpp and -out")
	}
	quantize := filepath.Join(llamacpp, "bin", "llama-quantize")
	greedy := filepath.Join(llamacpp, "bin", "greedy-ids")
	for _, p := range []string{quantize, greedy} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("-llamacpp %s: %w", llamacpp, err)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "quantref")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ids := make([]string, len(prompt))
	for i, id := range prompt {
		ids[i] = strconv.Itoa(id)
	}
	for _, fx := range fixtures {
		base := filepath.Join(tmp, fx.name+"-f32.gguf")
		if keep {
			base = filepath.Join(out, fx.name+"-f32.gguf")
		}
		var buf bytes.Buffer
		if err := llama.WriteSynthetic(&buf, fx.shape, "f32", fx.seed); err != nil {
			return fmt.Errorf("%s: %w", fx.name, err)
		}
		if err := os.WriteFile(base, buf.Bytes(), 0o644); err != nil {
			return err
		}
		for _, typ := range fx.types {
			stem := filepath.Join(out, fx.name+"-"+strings.ToLower(typ))
			if typ == "F32" {
				if err := os.WriteFile(stem+".gguf", buf.Bytes(), 0o644); err != nil {
					return err
				}
			} else if _, err := command(tmp, quantize, base, stem+".gguf", typ, strconv.Itoa(threads)); err != nil {
				return err
			}
			stdout, err := command(tmp, greedy, stem+".gguf", strconv.Itoa(len(prompt)+steps), "-ids", strings.Join(ids, " "),
				"-kvf32", "-t", strconv.Itoa(threads), "-logits", stem+".logits.f32")
			if err != nil {
				return err
			}
			if err := os.WriteFile(stem+".txt", stdout, 0o644); err != nil {
				return err
			}
			fmt.Printf("%s: %s", stem, stdout)
		}
	}
	return nil
}

// command runs name with args in dir and returns its standard output; an error carries the
// command line and its standard error.
func command(dir, name string, args ...string) ([]byte, error) {
	abs := make([]string, len(args))
	for i, a := range args {
		abs[i] = a
		if strings.HasSuffix(a, ".gguf") || strings.HasSuffix(a, ".f32") {
			if p, err := filepath.Abs(a); err == nil {
				abs[i] = p
			}
		}
	}
	cmd := exec.Command(name, abs...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(abs, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}
