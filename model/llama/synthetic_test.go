package llama

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/gguf"
)

func init() {
	// One key/value head: attention splits rows across tasks.
	Shapes["tinymqa"] = Shape{Architecture: "llama", Dim: 64, Layers: 2, Heads: 4, KVHeads: 1, FFNDim: 128, VocabSize: 320, ContextLength: 128}
	// Heads of 32 values (a Q8_0 cache's groups), four query heads a key/value head and one.
	Shapes["tinymqahd32"] = Shape{Architecture: "llama", Dim: 128, Layers: 2, Heads: 4, KVHeads: 1, FFNDim: 128, VocabSize: 320, ContextLength: 128}
	Shapes["tinymha"] = Shape{Architecture: "llama", Dim: 128, Layers: 2, Heads: 4, KVHeads: 4, FFNDim: 128, VocabSize: 320, ContextLength: 128}
	// RoPE over part of each head (22 of 32 dimensions: pairs past the rotation kernels'
	// blocks of four and eight), in both layouts.
	Shapes["tinypartial"] = Shape{Architecture: "llama", Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 256, VocabSize: 320, ContextLength: 128, RopeDims: 22}
	Shapes["tinyqwenpartial"] = Shape{Architecture: "qwen2", Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 512, VocabSize: 320, ContextLength: 128, RopeBase: 1e6, RopeDims: 40}
}

// writeSynthetic writes a synthetic model to a temporary file and returns its path.
func writeSynthetic(t testing.TB, shape, ftype string) string {
	t.Helper()
	return writeShape(t, shape, Shapes[shape], ftype)
}

// writeShape writes a random-weight model of shape s as name-ftype.gguf in a temporary
// directory and returns its path.
func writeShape(t testing.TB, name string, s Shape, ftype string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSynthetic(&buf, s, ftype, 1); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+"-"+ftype+".gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// naiveLogits is an independent float64 implementation of the forward pass, written from the
// definitions, without a cache: it returns the logits after the last of tokens.
func naiveLogits(t testing.TB, path string, tokens []int32) []float64 {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arch, _ := f.Architecture()
	u := func(k string) int {
		v, err := f.ArchUint32(k)
		if err != nil {
			t.Fatal(err)
		}
		return int(v)
	}
	dim, layers, heads, kvHeads, ffn := u("embedding_length"), u("block_count"), u("attention.head_count"), u("attention.head_count_kv"), u("feed_forward_length")
	hd := dim / heads
	base, _ := f.ArchFloat32("rope.freq_base")
	eps, _ := f.ArchFloat32("attention.layer_norm_rms_epsilon")
	tensor := func(name string) []float64 {
		if _, ok := f.Tensor(name); !ok {
			return nil
		}
		v, err := f.TensorFloat32(name)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	// matvec: w is rows × cols, row-major (GGUF dims [cols, rows]).
	matvec := func(w, x []float64, rows int) []float64 {
		cols := len(x)
		out := make([]float64, rows)
		for r := range rows {
			var s float64
			for c := range cols {
				s += w[r*cols+c] * x[c]
			}
			out[r] = s
		}
		return out
	}
	norm := func(x, w []float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		sc := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
		out := make([]float64, len(x))
		for i := range x {
			out[i] = x[i] * sc * w[i]
		}
		return out
	}
	rd := u("rope.dimension_count") // the first rd dimensions of each head are rotated
	rope := func(v []float64, pos int) {
		for h := 0; h < len(v)/hd; h++ {
			x := v[h*hd : (h+1)*hd]
			for i := 0; i < rd/2; i++ {
				theta := float64(pos) * math.Pow(float64(base), -2*float64(i)/float64(rd))
				c, s := math.Cos(theta), math.Sin(theta)
				a, b := 2*i, 2*i+1
				if arch == "qwen2" {
					a, b = i, i+rd/2
				}
				x[a], x[b] = x[a]*c-x[b]*s, x[a]*s+x[b]*c
			}
		}
	}
	addTo := func(x, b []float64) {
		for i := range b {
			x[i] += b[i]
		}
	}
	embd := tensor("token_embd.weight")
	n := len(tokens)
	xs := make([][]float64, n)
	for i, tok := range tokens {
		xs[i] = append([]float64(nil), embd[int(tok)*dim:(int(tok)+1)*dim]...)
	}
	for l := range layers {
		w := func(s string) []float64 { return tensor("blk." + itoa(l) + "." + s) }
		attnNorm, wq, wk, wv, wo := w("attn_norm.weight"), w("attn_q.weight"), w("attn_k.weight"), w("attn_v.weight"), w("attn_output.weight")
		bq, bk, bv := w("attn_q.bias"), w("attn_k.bias"), w("attn_v.bias")
		ks := make([][]float64, n)
		vs := make([][]float64, n)
		qs := make([][]float64, n)
		for i := range n {
			h := norm(xs[i], attnNorm)
			qs[i], ks[i], vs[i] = matvec(wq, h, dim), matvec(wk, h, kvHeads*hd), matvec(wv, h, kvHeads*hd)
			addTo(qs[i], bq)
			addTo(ks[i], bk)
			addTo(vs[i], bv)
			rope(qs[i], i)
			rope(ks[i], i)
		}
		for i := range n {
			att := make([]float64, dim)
			for h := range heads {
				g := h / (heads / kvHeads)
				q := qs[i][h*hd : (h+1)*hd]
				sc := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					var s float64
					for d := range hd {
						s += q[d] * ks[j][g*hd+d]
					}
					sc[j] = s / math.Sqrt(float64(hd))
					mx = max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := range hd {
						att[h*hd+d] += sc[j] / sum * vs[j][g*hd+d]
					}
				}
			}
			addTo(xs[i], matvec(wo, att, dim))
		}
		ffnNorm, gate, up, down := w("ffn_norm.weight"), w("ffn_gate.weight"), w("ffn_up.weight"), w("ffn_down.weight")
		for i := range n {
			h := norm(xs[i], ffnNorm)
			g, u := matvec(gate, h, ffn), matvec(up, h, ffn)
			for k := range g {
				g[k] = g[k] / (1 + math.Exp(-g[k])) * u[k]
			}
			addTo(xs[i], matvec(down, g, dim))
		}
	}
	out := tensor("output.weight")
	if out == nil {
		out = embd
	}
	h := norm(xs[n-1], tensor("output_norm.weight"))
	return matvec(out, h, len(out)/dim)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestSyntheticAgainstNaive checks the forward pass of both architectures (adjacent-pair and
// NeoX RoPE, grouped-query attention, biases, tied and separate outputs) against the float64
// implementation above, after a prefill and after single-token steps.
func TestSyntheticAgainstNaive(t *testing.T) {
	for _, tc := range []struct {
		shape, ftype string
		tol          float64 // relative to the largest logit
	}{
		{"tiny", "f32", 1e-4},
		{"tinyqwen", "f32", 1e-4},
		{"tiny", "f16", 1e-4},
		{"tinyqwen", "bf16", 1e-4},
		{"tiny", "q8_0", 0.02},
		{"tinyqwen", "q8_0", 0.02},
		{"tinyqwen", "q4_0", 0.05},
		{"tinyqwen", "q4_k", 0.05},
		{"tinyqwen", "q6_k", 0.02},
		{"tinyqwen", "q4_k_m", 0.05},
		{"tinymqa", "f32", 1e-4},
		{"tinypartial", "f32", 1e-4},
		{"tinyqwenpartial", "f32", 1e-4},
	} {
		t.Run(tc.shape+"/"+tc.ftype, func(t *testing.T) {
			path := writeSynthetic(t, tc.shape, tc.ftype)
			m, err := Open(path, Options{BlockSize: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got, want := m.Params().Architecture, Shapes[tc.shape].Architecture; got != want {
				t.Fatalf("architecture %q, want %q", got, want)
			}
			tokens := []int32{1, 300, 17, 250, 42, 42, 99, 5, 260, 7, 8}
			st, _ := m.NewState()
			defer st.Close()
			for _, step := range [][2]int{{0, 8}, {8, 9}, {9, 11}} {
				batch := []core.ForwardItem{{State: st, Tokens: tokens[step[0]:step[1]]}}
				if err := m.Forward(context.Background(), batch); err != nil {
					t.Fatal(err)
				}
				want := naiveLogits(t, path, tokens[:step[1]])
				got := batch[0].Logits[0]
				var scale, worst float64
				for i := range want {
					scale = max(scale, math.Abs(want[i]))
					worst = max(worst, math.Abs(float64(got[i])-want[i]))
				}
				t.Logf("after %d tokens: %.3g of %.3g", step[1], worst, scale)
				if worst > tc.tol*scale {
					t.Errorf("after %d tokens: largest difference %.3g, %.3g of the largest logit (tolerance %.3g)", step[1], worst, worst/scale, tc.tol)
				}
			}
		})
	}
}

// TestAttentionChunks repeats a comparison with the naive implementation with attention
// taking its queries a few at a time.
func TestAttentionChunks(t *testing.T) {
	defer func(v int) { maxAttnScores = v }(maxAttnScores)
	maxAttnScores = 40
	path := writeSynthetic(t, "tinymqa", "f32")
	m, err := Open(path, Options{BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tokens := []int32{1, 300, 17, 250, 42, 42, 99, 5, 260, 7, 8, 9, 10, 11}
	st, _ := m.NewState()
	defer st.Close()
	batch := []core.ForwardItem{{State: st, Tokens: tokens, AllLogits: true}}
	if err := m.Forward(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 5, 14} {
		want := naiveLogits(t, path, tokens[:n])
		for i, w := range want {
			if d := math.Abs(float64(batch[0].Logits[n-1][i]) - w); d > 1e-5 {
				t.Fatalf("after %d tokens: logit %d differs by %.3g", n, i, d)
			}
		}
	}
}

func TestWriteSyntheticErrors(t *testing.T) {
	var buf bytes.Buffer
	for _, tc := range []struct {
		name  string
		shape Shape
		ftype string
	}{
		{"unknown type", Shapes["tiny"], "q5_k"},
		{"bad heads", Shape{Architecture: "llama", Dim: 10, Heads: 3, KVHeads: 1, Layers: 1, FFNDim: 8, VocabSize: 300, ContextLength: 8}, "f32"},
		{"small vocabulary", Shape{Architecture: "llama", Dim: 8, Heads: 2, KVHeads: 1, Layers: 1, FFNDim: 8, VocabSize: 100, ContextLength: 8}, "f32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := WriteSynthetic(&buf, tc.shape, tc.ftype, 1); err == nil {
				t.Fatal("WriteSynthetic succeeded")
			}
		})
	}
	if got := Shapes["rand110M"].Params(); got < 109_000_000 || got > 110_000_000 {
		t.Errorf("rand110M has %d parameters, want 109.5 M", got)
	}
	// The MoE benchmark shape: 2.5 times rand110M's weights, of which two experts in eight,
	// the attention and the embedding (about rand110M's count) are active per token.
	moe := Shapes["rand110M-moe"]
	total := moe.Params()
	expert := int64(moe.Layers) * 3 * int64(moe.Dim) * int64(moe.FFNDim)
	active := total - int64(moe.Experts-moe.ExpertsUsed)*expert
	if r := float64(total) / float64(Shapes["rand110M"].Params()); r < 2.4 || r > 2.7 {
		t.Errorf("rand110M-moe has %.2f times rand110M's parameters, want about 2.5", r)
	}
	if r := float64(active) / float64(Shapes["rand110M"].Params()); r < 0.95 || r > 1.05 {
		t.Errorf("rand110M-moe's active parameters are %.2f times rand110M's, want about 1", r)
	}
}

func TestUnsupported(t *testing.T) {
	// An architecture the package does not know.
	var buf bytes.Buffer
	s := Shapes["tiny"]
	s.Architecture = "gpt2"
	if err := WriteSynthetic(&buf, s, "f32", 1); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gpt2.gguf")
	os.WriteFile(path, buf.Bytes(), 0o644)
	if _, err := Open(path, Options{}); err == nil || !bytes.Contains([]byte(err.Error()), []byte(`architecture "gpt2" is not supported`)) {
		t.Fatalf("err = %v", err)
	}
}

// TestUnsupportedTensorType checks that a weight in a type the kernels lack is refused with
// an error naming the tensor and its type, and that a missing tensor is named too.
func TestUnsupportedTensorType(t *testing.T) {
	src, err := gguf.Open(writeSynthetic(t, "tinyqwen", "f32"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, tc := range []struct {
		name   string
		change func(name string) (skip bool, typ ggml.Type)
		want   []string
	}{
		{"IQ2_XXS weight", func(name string) (bool, ggml.Type) {
			if name == "blk.1.attn_q.weight" {
				return false, ggml.IQ2_XXS
			}
			return false, ggml.F32
		}, []string{`tensor "blk.1.attn_q.weight": type IQ2_XXS is not supported`}},
		{"missing weights", func(name string) (bool, ggml.Type) {
			return name == "blk.0.ffn_up.weight" || name == "output_norm.weight", ggml.F32
		}, []string{`missing tensor "blk.0.ffn_up.weight"`, `missing tensor "output_norm.weight"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := gguf.NewWriter()
			for _, kv := range src.Metadata {
				if err := w.Set(kv.Key, kv.Value); err != nil {
					t.Fatal(err)
				}
			}
			for _, ti := range src.Tensors {
				skip, typ := tc.change(ti.Name)
				if skip {
					continue
				}
				data, _ := src.TensorData(ti.Name)
				if typ != ti.Type {
					n, err := typ.RowBytes(int(ti.Elements()))
					if err != nil {
						t.Fatal(err)
					}
					data = make([]byte, n)
				}
				if err := w.AddTensor(ti.Name, typ, ti.Dims, data); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path, Options{})
			if err == nil {
				t.Fatal("Open succeeded")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
