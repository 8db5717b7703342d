package llama

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/gguf"
)

// Shape describes a model to build with random weights (WriteSynthetic): for benchmarks of
// real model sizes without the model, and for tests.
type Shape struct {
	// Architecture is "llama", "qwen2" (which adds Q, K and V biases), "qwen3" (which adds
	// RMSNorm weights for every query and key head, drawn around 1), "qwen3moe" (qwen3 with
	// experts), "qwen2moe", "phi3", "gemma2" or "gemma3".
	Architecture                                                  string
	Dim, Layers, Heads, KVHeads, FFNDim, VocabSize, ContextLength int
	// Experts > 0 makes the feed-forward network a mixture of that many experts of hidden
	// width ExpertFFNDim (FFNDim when 0), ExpertsUsed per token ("llama": Mixtral's layout;
	// "qwen2moe" adds a shared expert of width SharedFFNDim, FFNDim when 0).
	Experts, ExpertsUsed, ExpertFFNDim, SharedFFNDim int
	// Llama3Rope writes Llama 3.1's per-pair RoPE frequency factors ("rope_freqs.weight":
	// factor 8, low/high frequency factors 1 and 4, original context 8192), as its converter
	// does.
	Llama3Rope bool
	// LongRope ("phi3") writes Phi-3's LongRoPE tensors rope_factors_long and
	// rope_factors_short, an original context of a quarter of ContextLength, and the
	// attention factor √(1 + ln 4 / ln original).
	LongRope bool
	// AttnSoftcap, FinalSoftcap and SlidingWindow ("gemma2") are written as the metadata of
	// those names when not 0.
	AttnSoftcap, FinalSoftcap float32
	SlidingWindow             int
	// RopeLinear > 0 writes linear RoPE scaling with that factor (rope.scaling.type
	// "linear").
	RopeLinear float32
	// Tied shares the output projection with the token embedding.
	Tied bool
	// RopeBase is the RoPE frequency base (10 000 when zero).
	RopeBase float32
	// RopeDims is the number of dimensions of each head that RoPE rotates (the whole head when
	// zero), as partial-rotary models write rope.dimension_count.
	RopeDims int
}

// Shapes are the named shapes WriteSynthetic knows. "rand110M" is the llama.cpp baseline
// shape of loom's benchmarks: dim 768, 12 layers, 12 heads, FFN 2048, a Llama 2 sized
// vocabulary, tied output — 109.5 M parameters.
var Shapes = map[string]Shape{
	"rand110M": {Architecture: "llama", Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FFNDim: 2048, VocabSize: 32000, ContextLength: 1024, Tied: true},
	// rand110M-moe has rand110M's attention and, per layer, 8 experts of half its FFN width
	// with 2 used per token (Mixtral's layout, whose expert width llama.cpp reads from
	// feed_forward_length): about the active parameters of rand110M, 2.5 times its total.
	"rand110M-moe": {Architecture: "llama", Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FFNDim: 1024, VocabSize: 32000, ContextLength: 1024, Tied: true,
		Experts: 8, ExpertsUsed: 2},
	"rand15M":   {Architecture: "llama", Dim: 288, Layers: 6, Heads: 6, KVHeads: 6, FFNDim: 768, VocabSize: 32000, ContextLength: 256, Tied: true},
	"tiny":      {Architecture: "llama", Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 256, VocabSize: 320, ContextLength: 128, Tied: true},
	"tinyqwen":  {Architecture: "qwen2", Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 512, VocabSize: 320, ContextLength: 128, RopeBase: 1e6},
	"tinyqwen3": {Architecture: "qwen3", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 128, VocabSize: 272, ContextLength: 128, RopeBase: 1e6, Tied: true},
	"tinygemma3": {Architecture: "gemma3", Dim: 64, Layers: 7, Heads: 4, KVHeads: 2, FFNDim: 128, VocabSize: 272, ContextLength: 128, RopeBase: 1e6, Tied: true,
		SlidingWindow: 6, RopeLinear: 4},
	"tinyqwen3moe": {Architecture: "qwen3moe", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFNDim: 128, VocabSize: 272, ContextLength: 128, RopeBase: 1e6, Tied: true,
		Experts: 4, ExpertsUsed: 2, ExpertFFNDim: 48},
}

// ShapeNames returns the names of Shapes, sorted.
func ShapeNames() []string {
	names := make([]string, 0, len(Shapes))
	for n := range Shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Params returns the number of weights of the shape.
func (s Shape) Params() int64 {
	hd := s.Dim / s.Heads
	attn := int64(s.Dim) * int64(s.Heads*hd+2*s.KVHeads*hd) // q, k, v
	attn += int64(s.Heads*hd) * int64(s.Dim)                // output
	ffn := 3 * int64(s.Dim) * int64(s.FFNDim)
	if s.Experts > 0 {
		ffn = int64(s.Experts) * (int64(s.Dim) + 3*int64(s.Dim)*int64(s.expertFFN()))
		if s.Architecture == "qwen2moe" {
			ffn += int64(s.Dim) + 3*int64(s.Dim)*int64(s.sharedFFN())
		}
	}
	n := int64(s.Layers)*(attn+ffn+2*int64(s.Dim)) + int64(s.VocabSize)*int64(s.Dim) + int64(s.Dim)
	if !s.Tied {
		n += int64(s.VocabSize) * int64(s.Dim)
	}
	return n
}

func (s Shape) expertFFN() int {
	if s.ExpertFFNDim > 0 {
		return s.ExpertFFNDim
	}
	return s.FFNDim
}

func (s Shape) sharedFFN() int {
	if s.SharedFFNDim > 0 {
		return s.SharedFFNDim
	}
	return s.FFNDim
}

// SyntheticTypes lists the storage types WriteSynthetic accepts: a GGML type name in lower
// case, or "q4_k_m", llama.cpp's mixture of Q4_K with Q6_K for the output (or tied embedding)
// and for the value and down projections of the first and last eighth of the layers and every
// third layer between.
var SyntheticTypes = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m"}

// tensorType returns the storage type of a tensor under the synthetic type name ftype.
func tensorType(ftype, name string, layer, layers int, output bool) (ggml.Type, error) {
	if ftype == "q4_k_m" {
		moreBits := layer < layers/8 || layer >= 7*layers/8 || (layer-layers/8)%3 == 2
		switch {
		case output:
			return ggml.Q6_K, nil
		case (strings.HasSuffix(name, "attn_v.weight") || strings.HasSuffix(name, "ffn_down.weight")) && moreBits:
			return ggml.Q6_K, nil
		}
		return ggml.Q4_K, nil
	}
	t, ok := ggml.ParseType(strings.ToUpper(ftype))
	if !ok || !ggml.CanQuantize(t) {
		return 0, fmt.Errorf("synthetic model type %q: want one of %s", ftype, strings.Join(SyntheticTypes, ", "))
	}
	return t, nil
}

// WriteSynthetic writes a GGUF model of the given shape whose weights are drawn from N(0,
// 0.02²) with the given seed (norm weights are 1, biases N(0, 0.02²)), matrices stored as
// ftype (one of SyntheticTypes; 1-D tensors stay F32), with a SentencePiece-style vocabulary
// of byte tokens and made-up pieces so that the file loads like a real model. A matrix whose
// rows are not a whole number of ftype's blocks is stored as F32.
func WriteSynthetic(w io.Writer, s Shape, ftype string, seed uint64) error {
	if _, err := tensorType(ftype, "", 0, 1, false); err != nil {
		return err
	}
	if s.Heads <= 0 || s.KVHeads <= 0 || s.Dim%s.Heads != 0 || s.Heads%s.KVHeads != 0 {
		return fmt.Errorf("synthetic shape: %d heads, %d kv heads and dim %d do not fit", s.Heads, s.KVHeads, s.Dim)
	}
	if s.VocabSize < 259 {
		return fmt.Errorf("synthetic shape: vocabulary of %d: need 259 at least (3 specials and 256 bytes)", s.VocabSize)
	}
	arch := s.Architecture
	gw := gguf.NewWriter()
	set := func(k string, v any) {
		if err := gw.Set(k, v); err != nil {
			panic(err) // the values above are of valid types
		}
	}
	hd := s.Dim / s.Heads
	base := s.RopeBase
	if base == 0 {
		base = 10000
	}
	set("general.architecture", arch)
	set("general.name", fmt.Sprintf("synthetic %s %dM %s", arch, (s.Params()+500_000)/1_000_000, ftype))
	set(arch+".context_length", uint32(s.ContextLength))
	set(arch+".embedding_length", uint32(s.Dim))
	set(arch+".block_count", uint32(s.Layers))
	set(arch+".feed_forward_length", uint32(s.FFNDim))
	set(arch+".attention.head_count", uint32(s.Heads))
	set(arch+".attention.head_count_kv", uint32(s.KVHeads))
	set(arch+".attention.layer_norm_rms_epsilon", float32(1e-5))
	set(arch+".rope.dimension_count", uint32(cmp.Or(s.RopeDims, hd)))
	set(arch+".rope.freq_base", base)
	set(arch+".vocab_size", uint32(s.VocabSize))
	if s.LongRope {
		orig := s.ContextLength / 4
		set(arch+".rope.scaling.original_context_length", uint32(orig))
		set(arch+".rope.scaling.attn_factor", float32(math.Sqrt(1+math.Log(4)/math.Log(float64(orig)))))
	}
	if s.RopeLinear > 0 {
		set(arch+".rope.scaling.type", "linear")
		set(arch+".rope.scaling.factor", s.RopeLinear)
	}
	if s.AttnSoftcap != 0 {
		set(arch+".attn_logit_softcapping", s.AttnSoftcap)
	}
	if s.FinalSoftcap != 0 {
		set(arch+".final_logit_softcapping", s.FinalSoftcap)
	}
	if s.SlidingWindow != 0 {
		set(arch+".attention.sliding_window", uint32(s.SlidingWindow))
	}
	if s.Experts > 0 {
		set(arch+".expert_count", uint32(s.Experts))
		set(arch+".expert_used_count", uint32(s.ExpertsUsed))
		set(arch+".expert_feed_forward_length", uint32(s.expertFFN()))
		if arch == "qwen2moe" {
			set(arch+".expert_shared_feed_forward_length", uint32(s.sharedFFN()))
		}
	}

	tokens := make([]string, s.VocabSize)
	scores := make([]float32, s.VocabSize)
	types := make([]int32, s.VocabSize)
	tokens[0], tokens[1], tokens[2] = "<unk>", "<s>", "</s>"
	types[0], types[1], types[2] = 2, 3, 3
	for b := 0; b < 256; b++ {
		tokens[3+b] = fmt.Sprintf("<0x%02X>", b)
		types[3+b] = 6
	}
	for i := 259; i < s.VocabSize; i++ {
		tokens[i] = fmt.Sprintf("\u2581t%d", i)
		scores[i] = -float32(i)
		types[i] = 1
	}
	if arch == "phi3" { // llama.cpp looks these up by text in a Phi-3 vocabulary
		for i, t := range []string{"<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"} {
			tokens[s.VocabSize-1-i], types[s.VocabSize-1-i] = t, 3
		}
	}
	set("tokenizer.ggml.model", "llama")
	set("tokenizer.ggml.tokens", tokens)
	set("tokenizer.ggml.scores", scores)
	set("tokenizer.ggml.token_type", types)
	set("tokenizer.ggml.unknown_token_id", uint32(0))
	set("tokenizer.ggml.bos_token_id", uint32(1))
	set("tokenizer.ggml.eos_token_id", uint32(2))
	set("tokenizer.ggml.add_bos_token", true)

	tensorSeed := seed
	// addTensor adds a matrix of rows × cols, or n of them (a 3-D tensor of experts), drawn
	// from N(0, std²).
	addTensor := func(name string, n, rows, cols, layer int, output bool, std float64) error {
		t, err := tensorType(ftype, name, layer, s.Layers, output)
		if err != nil {
			return err
		}
		if _, err := t.RowBytes(cols); err != nil || strings.HasSuffix(name, "ffn_gate_inp.weight") {
			t = ggml.F32 // routers stay F32, as llama-quantize leaves them
		}
		tensorSeed++
		seed := tensorSeed
		dims := []uint64{uint64(cols), uint64(rows)}
		if n > 0 {
			dims = append(dims, uint64(n))
			rows *= n
		}
		return gw.AddTensorFunc(name, t, dims, func(out io.Writer) error {
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			row := make([]float32, cols)
			rb, _ := t.RowBytes(cols)
			buf := make([]byte, rb)
			for range rows {
				for i := range row {
					row[i] = float32(r.NormFloat64() * std)
				}
				if err := ggml.Quantize(t, row, buf); err != nil {
					return err
				}
				if _, err := out.Write(buf); err != nil {
					return err
				}
			}
			return nil
		})
	}
	addMatrix := func(name string, rows, cols, layer int, output bool) error {
		return addTensor(name, 0, rows, cols, layer, output, 0.02)
	}
	addFloats := func(name string, v []float32) error {
		buf := make([]byte, 4*len(v))
		ggml.Quantize(ggml.F32, v, buf)
		return gw.AddTensor(name, ggml.F32, []uint64{uint64(len(v))}, buf)
	}
	addVector := func(name string, n int, random bool) error {
		v := make([]float32, n)
		tensorSeed++
		r := rand.New(rand.NewPCG(tensorSeed, 0x5eed))
		for i := range v {
			v[i] = 1
			switch {
			case random:
				v[i] = float32(r.NormFloat64() * 0.02)
			case strings.HasSuffix(name, "_norm.weight") && (arch == "qwen3" || arch == "qwen3moe") && strings.Contains(name, "attn_"),
				strings.HasPrefix(name, "blk.") && (arch == "gemma2" || arch == "gemma3"):
				v[i] = float32(1 + r.NormFloat64()*0.1)
			}
		}
		return addFloats(name, v)
	}

	errs := []error{
		addMatrix("token_embd.weight", s.VocabSize, s.Dim, 0, s.Tied),
	}
	if s.Llama3Rope {
		errs = append(errs, addFloats("rope_freqs.weight", llama3RopeFactors(hd, float64(base))))
	}
	if s.LongRope { // factors rising from 1 to 4 (long) and to 1.5 (short) over the pairs
		long, short := make([]float32, hd/2), make([]float32, hd/2)
		for i := range long {
			t := float64(i) / float64(len(long)-1)
			long[i], short[i] = float32(1+3*t*t), float32(1+0.5*t)
		}
		errs = append(errs, addFloats("rope_factors_long.weight", long), addFloats("rope_factors_short.weight", short))
	}
	errs = append(errs,
		addVector("output_norm.weight", s.Dim, false),
	)
	if !s.Tied {
		errs = append(errs, addMatrix("output.weight", s.VocabSize, s.Dim, 0, true))
	}
	qDim, kvDim := s.Heads*hd, s.KVHeads*hd
	for l := range s.Layers {
		name := func(n string) string { return fmt.Sprintf("blk.%d.%s", l, n) }
		if arch == "phi3" {
			errs = append(errs,
				addVector(name("attn_norm.weight"), s.Dim, false),
				addMatrix(name("attn_qkv.weight"), qDim+2*kvDim, s.Dim, l, false),
				addMatrix(name("attn_output.weight"), s.Dim, qDim, l, false),
				addVector(name("ffn_norm.weight"), s.Dim, false),
				addMatrix(name("ffn_up.weight"), 2*s.FFNDim, s.Dim, l, false),
				addMatrix(name("ffn_down.weight"), s.Dim, s.FFNDim, l, false),
			)
			continue
		}
		errs = append(errs,
			addVector(name("attn_norm.weight"), s.Dim, false),
			addMatrix(name("attn_q.weight"), qDim, s.Dim, l, false),
			addMatrix(name("attn_k.weight"), kvDim, s.Dim, l, false),
			addMatrix(name("attn_v.weight"), kvDim, s.Dim, l, false),
			addMatrix(name("attn_output.weight"), s.Dim, qDim, l, false),
			addVector(name("ffn_norm.weight"), s.Dim, false),
		)
		if arch == "gemma2" || arch == "gemma3" {
			errs = append(errs,
				addVector(name("post_attention_norm.weight"), s.Dim, false),
				addVector(name("post_ffw_norm.weight"), s.Dim, false),
			)
		}
		if s.Experts > 0 {
			// The router is drawn wider than the other weights so that routing is decided
			// by clear margins, as in trained models.
			hid := s.expertFFN()
			errs = append(errs,
				addTensor(name("ffn_gate_inp.weight"), 0, s.Experts, s.Dim, l, false, 0.5),
				addTensor(name("ffn_gate_exps.weight"), s.Experts, hid, s.Dim, l, false, 0.02),
				addTensor(name("ffn_up_exps.weight"), s.Experts, hid, s.Dim, l, false, 0.02),
				addTensor(name("ffn_down_exps.weight"), s.Experts, s.Dim, hid, l, false, 0.02),
			)
			if arch == "qwen2moe" {
				sh := s.sharedFFN()
				errs = append(errs,
					addVector(name("ffn_gate_inp_shexp.weight"), s.Dim, true),
					addMatrix(name("ffn_gate_shexp.weight"), sh, s.Dim, l, false),
					addMatrix(name("ffn_up_shexp.weight"), sh, s.Dim, l, false),
					addMatrix(name("ffn_down_shexp.weight"), s.Dim, sh, l, false),
				)
			}
		} else {
			errs = append(errs,
				addMatrix(name("ffn_gate.weight"), s.FFNDim, s.Dim, l, false),
				addMatrix(name("ffn_up.weight"), s.FFNDim, s.Dim, l, false),
				addMatrix(name("ffn_down.weight"), s.Dim, s.FFNDim, l, false),
			)
		}
		if arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3" {
			errs = append(errs,
				addVector(name("attn_q_norm.weight"), hd, false),
				addVector(name("attn_k_norm.weight"), hd, false),
			)
		}
		if arch == "qwen2" || arch == "qwen2moe" {
			errs = append(errs,
				addVector(name("attn_q.bias"), qDim, true),
				addVector(name("attn_k.bias"), kvDim, true),
				addVector(name("attn_v.bias"), kvDim, true),
			)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	_, err := gw.WriteTo(w)
	return err
}

// llama3RopeFactors returns the per-pair divisors of the RoPE frequencies that Llama 3.1's
// "llama3" scaling gives a head of hd dimensions (factor 8, low and high frequency factors 1
// and 4, original context 8192): wavelengths shorter than 8192/4 keep their frequency, longer
// than 8192/1 are slowed 8 times, and those between are interpolated smoothly.
func llama3RopeFactors(hd int, base float64) []float32 {
	const factor, low, high, orig = 8.0, 1.0, 4.0, 8192.0
	out := make([]float32, hd/2)
	for i := range out {
		freq := 1 / math.Pow(base, float64(2*i)/float64(hd))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < orig/high:
			out[i] = 1
		case wavelen > orig/low:
			out[i] = factor
		default:
			smooth := (orig/wavelen - low) / (high - low)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}
