package llama

import (
	"bytes"
	"math"
	"os"
	"testing"

	"github.com/loomlm/loom/cache"
)

// TestQwen3AgainstFloat64Reference runs a random-weight qwen3 model (per-head RMSNorm on the
// queries and keys) along a fixed path of ids and compares every step's log-probabilities
// with an independent float64 NumPy implementation written from the architecture's published
// definition (testdata/qwen3/reference.py). The llama.cpp build beside this project predates
// qwen3, so this is the reference; loom computes in float32 with an F32 cache, and differs from
// float64 by rounding only (max |Δlogprob| ~1e-7 here, allowed 1e-4). As a control, the same model with the head norms
// switched off must be far from the reference, so the test sees them.
func TestQwen3AgainstFloat64Reference(t *testing.T) {
	const stem = "../../testdata/qwen3/tinyqwen3-f32"
	m, err := Open(stem+".gguf", Options{KVType: cache.Float32})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Params().Architecture != "qwen3" || m.layers[0].qNorm == nil {
		t.Fatalf("architecture %q, per-head norms loaded: %v", m.Params().Architecture, m.layers[0].qNorm != nil)
	}
	ref := loadQuantRef(t, stem, m.Params().VocabSize)
	worst := refDistance(t, m, ref, 1e-4)
	t.Logf("%d steps: max |Δlogprob| %.3g", len(ref.gen), worst)
	if worst > 1e-4 {
		t.Errorf("max |Δlogprob| %.3g > 1e-4", worst)
	}

	// Control: without the per-head norms the model is a different function.
	for i := range m.layers {
		m.layers[i].qNorm, m.layers[i].kNorm = nil, nil
	}
	st, err := m.NewState()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, b := logSoftmax(forward1(t, m, st, ref.prompt)), logSoftmax(ref.logits[0])
	off := 0.0
	for i := range a {
		off = max(off, math.Abs(a[i]-b[i]))
	}
	if off < 1e-2 {
		t.Errorf("without the head norms the first step is within %.3g of the reference: the test cannot see them", off)
	}
}

// refDistance runs m along ref's path (its prompt, then every generated id) in a fresh state
// and returns the largest |Δlogprob| of any step. With margin > 0 it also fails t at a step
// whose argmax differs from the reference's while the reference's top two are further apart
// than margin.
func refDistance(t *testing.T, m *Model, ref reference, margin float64) (worst float64) {
	t.Helper()
	st, err := m.NewState()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logits := forward1(t, m, st, ref.prompt)
	for s, next := range ref.gen {
		a, b := logSoftmax(logits), logSoftmax(ref.logits[s])
		for i := range a {
			worst = max(worst, math.Abs(a[i]-b[i]))
		}
		if margin > 0 && argmax(logits) != argmax(ref.logits[s]) && topMargin(ref.logits[s]) > margin {
			t.Errorf("step %d: argmax %d, the reference's %d", s, argmax(logits), argmax(ref.logits[s]))
		}
		if s+1 < len(ref.gen) {
			logits = forward1(t, m, st, []int32{next})
		}
	}
	return worst
}

// checkSyntheticFixture checks a fixture's provenance: WriteSynthetic's shape at type f32
// and seed 1 (what `loom bench --synthetic SHAPE --type f32` writes) reproduces the committed
// file byte for byte.
func checkSyntheticFixture(t *testing.T, path, shape string) {
	t.Helper()
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := WriteSynthetic(&got, Shapes[shape], "f32", 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("WriteSynthetic(%s, f32, 1) gives %d bytes that differ from the fixture's %d", shape, got.Len(), len(want))
	}
}

// TestQwen3FixtureIsSynthetic checks the fixture's provenance: WriteSynthetic's "tinyqwen3"
// shape at type f32 and seed 1 (what `loom bench --synthetic tinyqwen3 --type f32` writes)
// reproduces the committed file byte for byte.
func TestQwen3FixtureIsSynthetic(t *testing.T) {
	checkSyntheticFixture(t, "../../testdata/qwen3/tinyqwen3-f32.gguf", "tinyqwen3")
}
