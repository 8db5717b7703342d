package llama

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// archRefDir holds llama.cpp's runs on small random-weight models of each architecture
// variant (model/llama/internal/quantref -set arch; see its README).
const archRefDir = "../../testdata/llamacpp-arch"

// TestLlamaCppArchitectures runs loom along llama.cpp's greedy path on a small model of every
// architecture variant the two share and checks every step's token and log-probabilities:
// Mixtral-style mixture of experts (arch llama with experts, chosen weights renormalised),
// qwen2moe (routed experts used with their raw probabilities, plus a sigmoid-gated shared
// expert), Llama 3.1's RoPE frequency factors, Phi-3 (fused QKV and gate-up projections,
// LongRoPE factors) and Gemma 2 (embedding scale, sandwich norms, GELU, attention and final
// soft-capping, sliding-window attention on every other layer). Tolerances: F32 files differ
// only in the order of float additions and in tanh's last bits (1e-4 allows for it with a wide
// margin; seen: ~1e-7, and 3e-5 for Gemma 2, whose 26 layers — the fewest llama.cpp accepts —
// amplify them); Q8_0 files as in TestLlamaCppQuantised, except Gemma 2: there the same
// last-bit differences, through 26 layers of 8-bit activation quantisation, round some
// activations the other way, and each such flip moves the logits by ~1e-3 (seen: 4.6e-3 at
// most; 1e-2 allowed). The greedy tokens must be the same in every file.
func TestLlamaCppArchitectures(t *testing.T) {
	want := map[string]struct {
		arch       string
		experts    int
		ropeFactor bool
		tol        float64
	}{
		"mixtral-f32":   {"llama", 4, false, 1e-4},
		"mixtral-q8_0":  {"llama", 4, false, 1e-4},
		"qwen2moe-f32":  {"qwen2moe", 4, false, 1e-4},
		"qwen2moe-q8_0": {"qwen2moe", 4, false, 1e-4},
		"llama3-f32":    {"llama", 0, true, 1e-4},
		"phi3-f32":      {"phi3", 0, true, 1e-4},
		"phi3-q8_0":     {"phi3", 0, true, 1e-4},
		"gemma2-f32":    {"gemma2", 0, false, 1e-4},
		"gemma2-q8_0":   {"gemma2", 0, false, 1e-2},
	}
	files, err := filepath.Glob(filepath.Join(archRefDir, "*.gguf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no reference models in %s (%v)", archRefDir, err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		stem := strings.TrimSuffix(file, ".gguf")
		name := filepath.Base(stem)
		w, ok := want[name]
		if !ok {
			t.Fatalf("%s: not in the test's table", file)
		}
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			m, err := Open(file, Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := m.Params()
			factors := false // whether any pair's frequency is divided by a factor
			for i, f := range m.invFreq {
				plain := math.Pow(p.RopeBase, -2*float64(i)/float64(p.RopeDims))
				factors = factors || math.Abs(f-plain) > 1e-9*plain
			}
			m.Close()
			if p.Architecture != w.arch || p.Experts != w.experts || factors != w.ropeFactor {
				t.Fatalf("loaded as %s with %d experts, RoPE factors %v; want %s, %d, %v", p.Architecture, p.Experts, factors, w.arch, w.experts, w.ropeFactor)
			}
			lp, _ := compareWithLlamaCpp(t, stem)
			if lp > w.tol {
				t.Errorf("max |Δlogprob| %.3g > %.3g", lp, w.tol)
			}
		})
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no %s.gguf in %s", name, archRefDir)
		}
	}

	// Control: the comparison sees the routing. With the chosen experts' weights used as
	// they are instead of renormalised, the Mixtral model's first step is more than ten
	// times the tolerance from llama.cpp's (the FFN adds little to the residual in a model of
	// random weights, so the difference is small, but far outside rounding).
	m, err := Open(filepath.Join(archRefDir, "mixtral-f32.gguf"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.p.NormExpertWeights = false
	st, err := m.NewState()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ref := loadQuantRef(t, filepath.Join(archRefDir, "mixtral-f32"), m.Params().VocabSize)
	a, b := logSoftmax(forward1(t, m, st, ref.prompt)), logSoftmax(ref.logits[0])
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	if d < 1e-3 {
		t.Errorf("without renormalised expert weights the first step is within %.3g of llama.cpp: the test cannot see routing", d)
	}
}
