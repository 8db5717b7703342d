package llama

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomlm/loom/cache"
)

// TestKVQ8AgainstF32 decodes the embedded model (the repository's models/default.gguf) with
// each cache type and compares with an F32 cache: the same greedy ids for all 96 steps, the
// logits close (Q8_0's 8-bit values move them about 30 times as far as half precision does:
// 0.05 at most, 0.005 rms, when the test was written).
func TestKVQ8AgainstF32(t *testing.T) {
	const steps = 96
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(300 + i*37%2000)
	}
	run := func(kv cache.DType) ([]int32, [][]float32) {
		m, err := Open(filepath.Join("..", "..", "models", "default.gguf"), Options{KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return greedy(t, m, prompt, steps)
	}
	refIDs, refRows := run(cache.Float32)
	for _, tc := range []struct {
		kv      cache.DType
		maxDiff float64 // largest logit difference allowed
	}{
		{cache.Float16, 0.01},
		{cache.Q8_0, 0.2},
	} {
		ids, rows := run(tc.kv)
		same := 0
		for same < steps && ids[same] == refIDs[same] {
			same++
		}
		var worst, rms float64
		for i := range same {
			worst = max(worst, maxAbsDiff(rows[i], refRows[i]))
			for j, x := range rows[i] {
				d := float64(x - refRows[i][j])
				rms += d * d
			}
		}
		rms = math.Sqrt(rms / float64(max(same, 1)*len(rows[0])))
		t.Logf("%v: %d/%d ids equal; over them logits differ by %.3g at most, %.3g rms", tc.kv, same, steps, worst, rms)
		if same < steps || worst > tc.maxDiff {
			t.Errorf("%v cache: %d of %d ids equal, largest logit difference %.3g (want ≤ %g)", tc.kv, same, steps, worst, tc.maxDiff)
		}
	}
}

// TestKVQ8NeedsHeadsOf32 opens a model whose heads are 8 values wide with a Q8_0 cache: a
// clear error naming the file, not a cache that cannot hold them.
func TestKVQ8NeedsHeadsOf32(t *testing.T) {
	shape := Shapes["tiny"]
	shape.Heads, shape.KVHeads = 16, 16 // heads of 128/16 = 8 values
	path := writeShape(t, "narrow-heads", shape, "f32")
	_, err := Open(path, Options{KVType: cache.Q8_0})
	if err == nil || !strings.Contains(err.Error(), "head dimension 8 is not a multiple of 32") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open with a Q8_0 cache: %v; want an error naming the file and the head dimension", err)
	}
}
