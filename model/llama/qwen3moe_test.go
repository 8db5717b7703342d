package llama

import (
	"testing"

	"github.com/loomlm/loom/cache"
)

// TestQwen3MoEAgainstFloat64Reference runs a random-weight qwen3moe model (qwen3's per-head
// query and key norms, and a mixture of 4 experts of which 2 are used, their router
// probabilities renormalised) along a fixed path of ids and compares every step's
// log-probabilities with the independent float64 NumPy forward of testdata/qwen3/reference.py,
// written from the architecture's published definition (the llama.cpp build beside this
// project predates qwen3moe). Controls: without the renormalisation, and with other experts
// chosen, the model is far from the reference.
func TestQwen3MoEAgainstFloat64Reference(t *testing.T) {
	const stem = "../../testdata/qwen3moe/tinyqwen3moe-f32"
	m, err := Open(stem+".gguf", Options{KVType: cache.Float32})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := m.Params()
	if p.Architecture != "qwen3moe" || p.Experts != 4 || p.ExpertsUsed != 2 || !p.NormExpertWeights || m.layers[0].qNorm == nil || m.layers[0].experts == nil {
		t.Fatalf("loaded as %s, %d experts (%d used, renormalised %v), head norms %v, experts %v",
			p.Architecture, p.Experts, p.ExpertsUsed, p.NormExpertWeights, m.layers[0].qNorm != nil, m.layers[0].experts != nil)
	}
	ref := loadQuantRef(t, stem, p.VocabSize)
	run := func() float64 { return refDistance(t, m, ref, 0) }
	worst := run()
	t.Logf("%d steps: max |Δlogprob| %.3g", len(ref.gen), worst)
	if worst > 1e-4 {
		t.Errorf("max |Δlogprob| %.3g > 1e-4", worst)
	}

	m.p.NormExpertWeights = false
	if off := run(); off < 1e-3 {
		t.Errorf("without renormalised expert weights the model is within %.3g of the reference: the test cannot see them", off)
	}
	m.p.NormExpertWeights = true
	for i := range m.layers { // swap two experts: the router now picks other weights
		e := m.layers[i].experts
		e[0], e[1] = e[1], e[0]
	}
	if off := run(); off < 1e-3 {
		t.Errorf("with experts 0 and 1 swapped the model is within %.3g of the reference: the test cannot see the routing", off)
	}
}

// TestQwen3MoEFixtureIsSynthetic checks the fixture's provenance: WriteSynthetic's
// "tinyqwen3moe" shape at type f32 and seed 1 (what `loom bench --synthetic tinyqwen3moe
// --type f32` writes) reproduces the committed file byte for byte.
func TestQwen3MoEFixtureIsSynthetic(t *testing.T) {
	checkSyntheticFixture(t, "../../testdata/qwen3moe/tinyqwen3moe-f32.gguf", "tinyqwen3moe")
}
