// Package llama runs transformer language models of the llama family stored in GGUF files:
// Llama 2 and 3 (with Llama 3.1's RoPE frequency factors), TinyLlama, SmolLM, Mistral and
// Mixtral (architecture "llama"), Qwen2 and Qwen2.5 ("qwen2"), Qwen3 ("qwen3", the dense
// models), Qwen1.5-MoE and Qwen2-MoE ("qwen2moe"), Qwen3's mixtures of experts ("qwen3moe"),
// Phi-3 and Phi-4 ("phi3"), Gemma 2 ("gemma2") and Gemma 3 ("gemma3", the text model).
//
// The forward pass is the usual pre-norm decoder: token embedding; per layer RMSNorm,
// grouped-query attention with rotary position embeddings, a residual, RMSNorm, a SwiGLU
// feed-forward network and a residual; a final RMSNorm and the output projection (tied to the
// embedding when the file has no output matrix). Architecture "llama" rotates adjacent pairs of
// each head's dimensions (llama.cpp's "norm" RoPE); "qwen2" rotates the first half of the
// dimensions against the second half (the NeoX layout) and adds biases to Q, K and V; "qwen3"
// rotates like qwen2, has no biases, and RMS-normalises every query and key head (with weights
// of its own) before the rotation. "phi3" stores Q, K and V as one fused matrix and the gate
// and up projections as another, and scales RoPE frequencies by LongRoPE factors (the long or
// short set, chosen by the context length). "gemma2" scales the embedding by √dim, adds a
// second RMSNorm after attention and after the feed-forward network (sandwich norms), uses a
// GELU gate, soft-caps attention scores and final logits (c·tanh(x/c)), and lets every other
// layer attend only to a sliding window of recent positions. "gemma3" drops the soft caps,
// normalises query and key heads as qwen3 does, makes five layers in six sliding-window ones,
// and gives those a RoPE base of their own (10 000, unscaled).
//
// A mixture-of-experts layer (a "llama" file with llama.expert_count, "qwen2moe" or
// "qwen3moe") routes each row to its top-k experts by a softmax over a router; Mixtral and
// qwen3moe renormalise the chosen probabilities, qwen2moe uses them as they are and adds a
// shared expert gated by a sigmoid.
// Each expert runs once per forward, on the rows routed to it, so the cost follows the active
// parameters, not the total.
//
// Weights stay in the memory-mapped file in their stored type (F32, F16, BF16, Q8_0, Q4_0,
// Q4_K, Q6_K) and are multiplied by the kernels package as they are; only the small vectors
// (norm weights, biases) are decoded to float32. Keys and values live in a paged cache
// (package cache) shared by all sequences of a model, so forks are copy-on-write and a prompt
// that starts like an earlier one reuses its cached blocks.
//
// Model implements core.Model: Forward advances several sequences at once, each by its own
// new tokens at its own positions, with one matrix product per weight for all of their rows.
// Forward may be called concurrently on different states.
package llama

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/gguf"
	"github.com/loomlm/loom/model/kernels"
)

// Params are a model's hyper-parameters, read from its GGUF metadata.
type Params struct {
	// Architecture is "llama", "qwen2" or "qwen3"; Name is general.name when present.
	Architecture, Name string
	// VocabSize is the number of rows of the embedding (and of logits).
	VocabSize int
	// ContextLength is the positions a sequence may hold (the file's, or Options.ContextLength).
	ContextLength int
	// Dim is the width of the residual stream; Layers the number of transformer blocks.
	Dim, Layers int
	// Heads and KVHeads are the numbers of query and key/value heads; HeadDim their width.
	Heads, KVHeads, HeadDim int
	// FFNDim is the hidden width of the feed-forward network.
	FFNDim int
	// RMSEps is the epsilon of RMSNorm.
	RMSEps float32
	// RopeDims is the number of dimensions of each head that are rotated (≤ HeadDim);
	// RopeBase is the frequency base; RopeFreqScale multiplies positions (1 / the linear
	// scaling factor); RopeNeoX selects the rotate-halves layout instead of adjacent pairs.
	RopeDims      int
	RopeBase      float64
	RopeFreqScale float64
	RopeNeoX      bool
	// TiedOutput is true when the output projection is the token embedding.
	TiedOutput bool

	// Experts is the number of experts of a mixture-of-experts feed-forward network (0 for a
	// dense one); each token is routed to the ExpertsUsed experts of highest router
	// probability, whose hidden width is ExpertFFNDim. NormExpertWeights rescales the chosen
	// experts' probabilities to sum to 1 (Mixtral) instead of using them as they are
	// (qwen2moe). SharedFFNDim is the hidden width of qwen2moe's shared expert, which every
	// token goes through, scaled by a sigmoid gate (0 when there is none).
	Experts, ExpertsUsed, ExpertFFNDim, SharedFFNDim int
	NormExpertWeights                                bool

	// RopeAttnFactor scales RoPE's cosines and sines (LongRoPE's attention factor, from
	// rope.scaling.attn_factor; 1 otherwise). RopeFactors names the tensor of per-pair
	// frequency divisors in use ("rope_freqs.weight", Phi-3's "rope_factors_long.weight" when
	// the context is longer than the original one, else "rope_factors_short.weight"; "" for
	// none).
	RopeAttnFactor float64
	RopeFactors    string

	// Gemma 2: EmbedScale multiplies the token embeddings (sqrt(Dim); 0 for none);
	// AttnSoftcap and FinalSoftcap cap attention scores and logits as c·tanh(x/c) (0 for
	// none); SlidingWindow > 0 limits the attention of the even-numbered layers to the last
	// SlidingWindow positions; GELU selects the tanh-approximated GELU instead of SiLU in the
	// gated feed-forward network; and every layer normalises its attention and feed-forward
	// outputs before adding them to the residual stream.
	EmbedScale                float32
	AttnSoftcap, FinalSoftcap float32
	SlidingWindow             int
	GELU                      bool
	// SlidingWindowPattern: layer i attends through the sliding window when i mod the pattern
	// is below pattern-1 (Gemma 2: 2, every other layer; Gemma 3: 6, five local layers for
	// one global). RopeLocalBase is the RoPE base of those layers, which are not scaled (0:
	// as the others). AttnScale multiplies attention scores (0: 1/√HeadDim).
	SlidingWindowPattern int
	RopeLocalBase        float64
	AttnScale            float64
}

// Options tune a loaded model. The zero value is ready to use.
type Options struct {
	// KVType is the element type of the KV cache (default Float32; Q8_0 needs a head
	// dimension that is a multiple of 32).
	KVType cache.DType
	// KVBudget is the most bytes the KV cache may take (default: room for eight sequences of
	// the full context, at most 2 GiB).
	KVBudget int64
	// BlockSize is the positions per cache block (default cache.DefaultBlockSize).
	BlockSize int
	// NoPrefixCache turns off the reuse of cached prompt prefixes across sequences.
	NoPrefixCache bool
	// NoRepack keeps the weights in the file's layout: by default matrices of the types with
	// packed kernels (Q4_0, Q8_0, IQ4_NL on AVX-512 VNNI) are copied into that layout at load
	// (kernels.Pack), which makes their products faster and takes their size in memory again.
	NoRepack bool
	// ContextLength overrides the file's context length (0 keeps it).
	ContextLength int
	// BatchTokens is the most token rows one pass through the layers takes; longer inputs are
	// split into passes of this size (default 256).
	BatchTokens int
	// NoPrefetch skips reading the weights once at load time. By default every page of the
	// weights is touched while loading, so that the first forward pass does not pay for
	// reading the file. Packing (see NoRepack) reads the packed matrices at load either way.
	NoPrefetch bool
	// NoMmap reads the file into the process's own memory instead of mapping it (Open only;
	// see gguf.ReadFile): on Linux memory advised for transparent huge pages. The weights
	// that are read in place (float types, and the quantized ones that are not packed) then
	// stream from it faster wherever file-backed pages are slow to read through: on the
	// machine docs/BENCHMARKS.md measures on, a 110M F32 model generates 4–30 % faster, and
	// twice as fast in some of its states. It
	// costs the copy's memory (the page cache may keep the file as well) and the time to read
	// the whole file at load, which the default prefetch spends anyway.
	NoMmap bool
	// Progress, when set, is told about long work: stage "load" counts bytes of weights
	// read (of the whole file with NoMmap), stage "prefill" counts tokens of a forward pass that takes several passes.
	Progress func(stage string, done, total int64)
}

// layer holds one transformer block's weights.
type layer struct {
	attnNorm, ffnNorm []float32
	wq, wk, wv, wo    kernels.Matrix
	bq, bk, bv        []float32 // nil when absent
	qNorm, kNorm      []float32 // qwen3: RMSNorm weights of every query and key head (nil when absent)
	// gemma2: RMSNorm weights of the attention and feed-forward outputs (nil when absent).
	postAttnNorm, postFFNNorm []float32
	// window is the number of past positions (the own included) the layer attends to; 0
	// for all.
	window int
	// qkv groups the matrices that multiply the same input, for kernels.MatMuls.
	qkv []kernels.Matrix
	// dense is the feed-forward network of a layer without experts.
	dense ffn

	// Mixture of experts (router.Rows == 0 when the feed-forward network is dense): the
	// router (Experts × Dim), the experts, and qwen2moe's shared expert and its gate vector.
	router     kernels.Matrix
	experts    []ffn
	shared     ffn
	sharedGate []float32
}

// ffn is one SwiGLU feed-forward network: down(silu(gate·x) ⊙ up·x).
type ffn struct {
	gateUp []kernels.Matrix // gate, up
	down   kernels.Matrix
}

// Model is a loaded llama-family model. It implements core.Model.
type Model struct {
	p    Params
	opts Options
	file *gguf.File
	own  bool // Close closes file
	// life guards the weights against Close: every Forward holds it for reading while it
	// runs and Close for writing, so that Close waits for the passes in flight and a pass
	// after Close fails with ErrClosed instead of reading a file that is no longer mapped.
	life   sync.RWMutex
	closed bool

	embd       kernels.Matrix // VocabSize × Dim, any dequantisable type
	embdRow    int            // bytes per embedding row
	outputNorm []float32
	output     kernels.Matrix
	layers     []layer
	invFreq    []float64 // per rotated pair: base^(-2i/RopeDims) / factor_i
	// invFreqLocal are the sliding-window layers' frequencies when they have a base of their
	// own (RopeLocalBase), else nil.
	invFreqLocal []float64

	pool       *cache.Pool
	workspaces sync.Pool
	workers    int
	// sharePuts is whether a forward's rows are written to the cache on the workers (see
	// layer): for weights of putShareBytes or more.
	sharePuts bool
	// spareLogits are the logits buffers of closed states, kept for new ones (see
	// state.setRows).
	spareLogits struct {
		sync.Mutex
		bufs [][]float32
	}
}

// putShareBytes is the size of weights from which a forward of two rows or more shares its
// rows' cache writes out to the workers. The weights a forward streams between two layers'
// writes evict the cache blocks of weights this large, so each row's writes wait on memory
// (rand110M Q8_0, 117 MB: four rows 5.5–5.9 → 4.9–5.3 ms a forward, binaries alternating); a
// small model's blocks stay in cache, and handing out the writes costs more than they do (the
// embedded 11 MB model: two rows 333 → 351–357 µs).
const putShareBytes = 64 << 20

// archs lists the supported architectures and whether they rotate in the NeoX layout.
var archs = map[string]struct{ neox bool }{
	"llama": {neox: false},
	"qwen2": {neox: true},
	"qwen3": {neox: true},
	// qwen2moe is qwen2's attention with a mixture-of-experts feed-forward network and a
	// shared expert; Mixtral-style MoE needs no name of its own: it is "llama" with
	// llama.expert_count set.
	"qwen2moe": {neox: true},
	// qwen3moe is qwen3's attention with a mixture-of-experts feed-forward network (chosen
	// weights renormalised, no shared expert).
	"qwen3moe": {neox: true},
	// phi3 is llama's block with fused QKV and gate-up matrices and LongRoPE frequency
	// factors.
	"phi3": {neox: true},
	// gemma2 adds an embedding scale, normalised attention and FFN outputs, GELU, soft caps
	// on attention scores and logits, and sliding-window attention on every other layer.
	"gemma2": {neox: true},
	// gemma3 is gemma2 without soft caps, with qwen3's per-head query and key norms, five
	// sliding-window layers for every global one, and a RoPE base of its own on the
	// sliding-window layers.
	"gemma3": {neox: true},
}

// Architectures returns the names of the supported architectures.
func Architectures() []string {
	names := make([]string, 0, len(archs))
	for n := range archs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open loads the model in the GGUF file at path. The file stays memory-mapped until Close
// (read into memory instead with opts.NoMmap).
func Open(path string, opts Options) (*Model, error) {
	var f *gguf.File
	var err error
	if opts.NoMmap {
		var progress func(done, total int64)
		if opts.Progress != nil {
			progress = func(done, total int64) { opts.Progress("load", done, total) }
		}
		f, err = gguf.ReadFile(path, progress)
		opts.NoPrefetch = true // the weights are in memory already
	} else {
		f, err = gguf.Open(path)
	}
	if err != nil {
		return nil, err
	}
	m, err := New(f, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.own = true
	return m, nil
}

// New builds a model on an open GGUF file, which must stay open while the model is used
// (Close does not close it). Errors name the missing metadata or tensors and the unsupported
// architecture or tensor types.
func New(f *gguf.File, opts Options) (*Model, error) {
	p, err := readParams(f, opts)
	if err != nil {
		return nil, err
	}
	m := &Model{p: p, opts: opts, file: f, workers: runtime.GOMAXPROCS(0)}
	m.sharePuts = m.WeightBytes() >= putShareBytes
	if m.opts.BatchTokens <= 0 {
		m.opts.BatchTokens = 256
	}
	if err := m.loadTensors(); err != nil {
		return nil, err
	}
	m.invFreq, err = ropeFrequencies(f, p)
	if err != nil {
		return nil, err
	}
	if p.RopeLocalBase != 0 {
		local := p
		local.RopeBase, local.RopeFactors = p.RopeLocalBase, ""
		if m.invFreqLocal, err = ropeFrequencies(f, local); err != nil {
			return nil, err
		}
	}
	budget := opts.KVBudget
	if budget == 0 {
		perSeq := int64(p.ContextLength) * 2 * int64(p.Layers) * int64(p.KVHeads) * int64(opts.KVType.Bytes(p.HeadDim))
		budget = min(8*perSeq, 2<<30)
		budget = max(budget, 64<<20)
	}
	m.pool, err = cache.NewPool(cache.Config{
		Layers: p.Layers, KVHeads: p.KVHeads, HeadDim: p.HeadDim, BlockSize: opts.BlockSize, DType: opts.KVType,
		Budget: budget, NoPrefixCache: opts.NoPrefixCache,
	})
	if err != nil {
		return nil, err
	}
	if !opts.NoPrefetch {
		m.prefetch()
	}
	return m, nil
}

// readParams reads the hyper-parameters from the metadata.
func readParams(f *gguf.File, opts Options) (Params, error) {
	var p Params
	arch, err := f.Architecture()
	if err != nil {
		return p, err
	}
	a, ok := archs[arch]
	if !ok {
		return p, fmt.Errorf("architecture %q is not supported (supported: %s)", arch, strings.Join(Architectures(), ", "))
	}
	p.Architecture, p.RopeNeoX = arch, a.neox
	p.Name, _ = f.String("general.name")

	var errs []error
	req := func(name string) int {
		v, err := f.ArchUint32(name)
		if err != nil {
			errs = append(errs, err)
		}
		return int(v)
	}
	opt := func(name string, def int) int {
		if !f.Has(f.ArchKey(name)) {
			return def
		}
		return req(name)
	}
	p.Dim = req("embedding_length")
	p.Layers = req("block_count")
	p.Heads = req("attention.head_count")
	p.FFNDim = req("feed_forward_length")
	p.ContextLength = req("context_length")
	if err := errors.Join(errs...); err != nil {
		return p, err
	}
	p.KVHeads = opt("attention.head_count_kv", p.Heads)
	if p.Heads > 0 {
		p.HeadDim = opt("attention.key_length", p.Dim/p.Heads)
	}
	if v := opt("attention.value_length", p.HeadDim); v != p.HeadDim {
		return p, fmt.Errorf("%s = %d differs from the key length %d: not supported", f.ArchKey("attention.value_length"), v, p.HeadDim)
	}
	p.RopeDims = opt("rope.dimension_count", p.HeadDim)
	p.Experts = opt("expert_count", 0)
	if p.Experts > 0 || arch == "qwen2moe" || arch == "qwen3moe" {
		p.ExpertsUsed = req("expert_used_count")
		p.ExpertFFNDim = opt("expert_feed_forward_length", p.FFNDim)
		p.NormExpertWeights = arch != "qwen2moe"
		if arch == "qwen2moe" {
			p.SharedFFNDim = opt("expert_shared_feed_forward_length", p.FFNDim)
		}
		if err := errors.Join(errs...); err != nil {
			return p, err
		}
		if p.Experts <= 0 || p.ExpertsUsed <= 0 || p.ExpertsUsed > p.Experts || p.ExpertFFNDim <= 0 {
			return p, fmt.Errorf("%s = %d, %s = %d, %s = %d: need 0 < experts used ≤ experts and a positive expert FFN width",
				f.ArchKey("expert_count"), p.Experts, f.ArchKey("expert_used_count"), p.ExpertsUsed,
				f.ArchKey("expert_feed_forward_length"), p.ExpertFFNDim)
		}
	}
	eps, err := f.ArchFloat32("attention.layer_norm_rms_epsilon")
	if err != nil {
		return p, err
	}
	p.RMSEps = eps
	p.RopeBase = 10000
	if f.Has(f.ArchKey("rope.freq_base")) {
		b, err := f.ArchFloat32("rope.freq_base")
		if err != nil {
			return p, err
		}
		p.RopeBase = float64(b)
	}
	p.RopeFreqScale = 1
	scaling := "none"
	if f.Has(f.ArchKey("rope.scaling.type")) {
		if scaling, err = f.String(f.ArchKey("rope.scaling.type")); err != nil {
			return p, err
		}
	}
	p.RopeAttnFactor = 1
	if f.Has(f.ArchKey("rope.scaling.attn_factor")) {
		v, err := f.ArchFloat32("rope.scaling.attn_factor")
		if err != nil {
			return p, err
		}
		p.RopeAttnFactor = float64(v)
	}
	if opts.ContextLength > 0 {
		p.ContextLength = opts.ContextLength
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		p.RopeFactors = "rope_freqs.weight"
	}
	if _, ok := f.Tensor("rope_factors_long.weight"); ok && arch == "phi3" {
		// LongRoPE: the long factors when the context exceeds the original one (as llama.cpp
		// chooses by its context size), else the short ones.
		orig, err := f.ArchUint32("rope.scaling.original_context_length")
		if err != nil {
			return p, fmt.Errorf("LongRoPE factors need the original context length: %w", err)
		}
		p.RopeFactors = "rope_factors_short.weight"
		if p.ContextLength > int(orig) {
			p.RopeFactors = "rope_factors_long.weight"
		}
	}
	if arch == "gemma2" {
		p.EmbedScale = float32(math.Sqrt(float64(p.Dim)))
		p.GELU = true
		p.AttnSoftcap, p.FinalSoftcap, p.SlidingWindow = 50, 30, 4096 // the defaults of Gemma 2
		for _, k := range []struct {
			key string
			dst *float32
		}{{"attn_logit_softcapping", &p.AttnSoftcap}, {"final_logit_softcapping", &p.FinalSoftcap}} {
			if f.Has(f.ArchKey(k.key)) {
				if *k.dst, err = f.ArchFloat32(k.key); err != nil {
					return p, err
				}
			}
		}
		p.SlidingWindow = opt("attention.sliding_window", p.SlidingWindow)
		p.SlidingWindowPattern = 2
	}
	if arch == "gemma3" {
		// As llama.cpp reads Gemma 3: no soft caps, a local RoPE base of 10 000, a global
		// layer after every five local ones, and queries scaled by 1/√(Dim/Heads) for the 27B
		// model (62 layers), by 1/√HeadDim otherwise.
		p.EmbedScale = float32(math.Sqrt(float64(p.Dim)))
		p.GELU = true
		p.SlidingWindow = req("attention.sliding_window")
		p.SlidingWindowPattern = 6
		p.RopeLocalBase = 10000
		if p.Layers == 62 {
			p.AttnScale = 1 / math.Sqrt(float64(p.Dim/p.Heads))
		}
		if err := errors.Join(errs...); err != nil {
			return p, err
		}
	}
	switch scaling {
	case "longrope":
		if p.RopeFactors == "" {
			return p, fmt.Errorf("%s = \"longrope\" but the file has no rope_factors_long/short tensors", f.ArchKey("rope.scaling.type"))
		}
	case "none", "":
	case "linear":
		factor, err := f.ArchFloat32("rope.scaling.factor")
		if err != nil {
			return p, err
		}
		if factor > 0 {
			p.RopeFreqScale = 1 / float64(factor)
		}
	default:
		return p, fmt.Errorf("%s = %q: not supported (supported: none, linear, longrope; Llama 3's scaling comes as the tensor rope_freqs.weight)", f.ArchKey("rope.scaling.type"), scaling)
	}
	if emb, ok := f.Tensor("token_embd.weight"); ok && len(emb.Dims) == 2 {
		p.VocabSize = int(emb.Dims[1])
	}
	_, hasOutput := f.Tensor("output.weight")
	p.TiedOutput = !hasOutput

	switch {
	case p.Dim <= 0 || p.Layers <= 0 || p.Heads <= 0 || p.KVHeads <= 0 || p.FFNDim <= 0 || p.HeadDim <= 0:
		return p, fmt.Errorf("bad shape: dim %d, %d layers, %d heads, %d kv heads, head dim %d, ffn %d",
			p.Dim, p.Layers, p.Heads, p.KVHeads, p.HeadDim, p.FFNDim)
	case p.Heads%p.KVHeads != 0:
		return p, fmt.Errorf("%d heads are not a multiple of %d kv heads", p.Heads, p.KVHeads)
	case p.RopeDims <= 0 || p.RopeDims > p.HeadDim || p.RopeDims%2 != 0:
		return p, fmt.Errorf("rope dimension count %d: must be even and at most the head dimension %d", p.RopeDims, p.HeadDim)
	case p.ContextLength <= 0:
		return p, fmt.Errorf("context length %d: must be positive", p.ContextLength)
	case p.VocabSize <= 0:
		return p, errors.New("missing or malformed tensor \"token_embd.weight\"")
	}
	return p, nil
}

// ropeFrequencies returns the rotation frequency of each pair of rotated dimensions, divided
// by the per-pair factors of the tensor p.RopeFactors (Llama 3.1, LongRoPE) when there is one.
func ropeFrequencies(f *gguf.File, p Params) ([]float64, error) {
	n := p.RopeDims / 2
	inv := make([]float64, n)
	for i := range inv {
		inv[i] = math.Pow(p.RopeBase, -2*float64(i)/float64(p.RopeDims))
	}
	if p.RopeFactors != "" {
		factors, err := f.TensorFloat32(p.RopeFactors)
		if err != nil {
			return nil, err
		}
		if len(factors) != n {
			return nil, fmt.Errorf("tensor %q has %d values, want %d", p.RopeFactors, len(factors), n)
		}
		for i, fa := range factors {
			inv[i] /= float64(fa)
		}
	}
	return inv, nil
}

// tensorLoader collects the problems of loading tensors so that one error names them all.
type tensorLoader struct {
	f    *gguf.File
	errs []string
}

func (ld *tensorLoader) fail(format string, args ...any) {
	ld.errs = append(ld.errs, fmt.Sprintf(format, args...))
}

func (ld *tensorLoader) info(name string, dims ...int) (*gguf.TensorInfo, bool) {
	ti, ok := ld.f.Tensor(name)
	if !ok {
		ld.fail("missing tensor %q", name)
		return nil, false
	}
	// Trailing dimensions of 1 do not count ([n] and [n, 1] are the same vector), as in
	// llama.cpp.
	have := ti.Dims
	for len(have) > 1 && have[len(have)-1] == 1 {
		have = have[:len(have)-1]
	}
	good := len(have) == len(dims)
	for i := 0; good && i < len(dims); i++ {
		good = have[i] == uint64(dims[i])
	}
	if !good {
		ld.fail("tensor %q has dimensions %v, want %v", name, ti.Dims, dims)
		return nil, false
	}
	return ti, true
}

// matrix loads a rows × cols weight matrix (GGUF dimensions [cols, rows]).
func (ld *tensorLoader) matrix(name string, rows, cols int) kernels.Matrix {
	ti, ok := ld.info(name, cols, rows)
	if !ok {
		return kernels.Matrix{}
	}
	return ld.matrixData(name, ti, rows, cols)
}

// experts loads a 3-D tensor of n matrices of rows × cols (GGUF dimensions [cols, rows, n]),
// as views of its data; nil when it is missing or malformed.
func (ld *tensorLoader) experts(name string, n, rows, cols int) []kernels.Matrix {
	ti, ok := ld.info(name, cols, rows, n)
	if !ok {
		return nil
	}
	whole := ld.matrixData(name, ti, n*rows, cols)
	if whole.Rows == 0 {
		return nil
	}
	out := make([]kernels.Matrix, n)
	for e := range out {
		out[e] = whole.Slice(e*rows, (e+1)*rows)
	}
	return out
}

// matrixData views the data of a tensor as a rows × cols matrix.
func (ld *tensorLoader) matrixData(name string, ti *gguf.TensorInfo, rows, cols int) kernels.Matrix {
	if !kernels.Supported(ti.Type) {
		ld.fail("tensor %q: type %s is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS)", name, ti.Type)
		return kernels.Matrix{}
	}
	data, err := ld.f.TensorData(name)
	if err != nil {
		ld.fail("%v", err)
		return kernels.Matrix{}
	}
	m, err := kernels.NewMatrix(ti.Type, rows, cols, data)
	if err != nil {
		ld.fail("tensor %q: %v", name, err)
		return kernels.Matrix{}
	}
	return m
}

// vector loads a vector of n values as float32; an absent optional vector is nil.
func (ld *tensorLoader) vector(name string, n int, optional bool) []float32 {
	if _, ok := ld.f.Tensor(name); !ok && optional {
		return nil
	}
	ti, ok := ld.info(name, n)
	if !ok {
		return nil
	}
	if !ggml.CanDequantize(ti.Type) {
		ld.fail("tensor %q: type %s is not supported", name, ti.Type)
		return nil
	}
	v, err := ld.f.TensorFloat32(name)
	if err != nil {
		ld.fail("%v", err)
	}
	return v
}

func (ld *tensorLoader) err() error {
	if len(ld.errs) == 0 {
		return nil
	}
	const most = 8
	msg := strings.Join(ld.errs[:min(len(ld.errs), most)], "; ")
	if len(ld.errs) > most {
		msg += fmt.Sprintf("; and %d more", len(ld.errs)-most)
	}
	return errors.New(msg)
}

func (m *Model) loadTensors() error {
	p := &m.p
	ld := &tensorLoader{f: m.file}
	qDim, kvDim := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	m.embd = ld.matrix("token_embd.weight", p.VocabSize, p.Dim)
	m.outputNorm = ld.vector("output_norm.weight", p.Dim, false)
	if p.TiedOutput {
		m.output = m.embd
	} else {
		m.output = ld.matrix("output.weight", p.VocabSize, p.Dim)
	}
	m.layers = make([]layer, p.Layers)
	for i := range m.layers {
		l := &m.layers[i]
		name := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		l.attnNorm = ld.vector(name("attn_norm.weight"), p.Dim, false)
		if _, fused := m.file.Tensor(name("attn_qkv.weight")); fused { // phi3
			qkv := ld.matrix(name("attn_qkv.weight"), qDim+2*kvDim, p.Dim)
			if qkv.Rows > 0 {
				l.wq, l.wk, l.wv = qkv.Slice(0, qDim), qkv.Slice(qDim, qDim+kvDim), qkv.Slice(qDim+kvDim, qDim+2*kvDim)
			}
		} else {
			l.wq = ld.matrix(name("attn_q.weight"), qDim, p.Dim)
			l.wk = ld.matrix(name("attn_k.weight"), kvDim, p.Dim)
			l.wv = ld.matrix(name("attn_v.weight"), kvDim, p.Dim)
		}
		l.wo = ld.matrix(name("attn_output.weight"), p.Dim, qDim)
		l.bq = ld.vector(name("attn_q.bias"), qDim, true)
		l.bk = ld.vector(name("attn_k.bias"), kvDim, true)
		l.bv = ld.vector(name("attn_v.bias"), kvDim, true)
		if p.Architecture == "qwen3" || p.Architecture == "qwen3moe" || p.Architecture == "gemma3" {
			l.qNorm = ld.vector(name("attn_q_norm.weight"), p.HeadDim, false)
			l.kNorm = ld.vector(name("attn_k_norm.weight"), p.HeadDim, false)
		}
		l.ffnNorm = ld.vector(name("ffn_norm.weight"), p.Dim, false)
		if p.Architecture == "gemma2" || p.Architecture == "gemma3" {
			l.postAttnNorm = ld.vector(name("post_attention_norm.weight"), p.Dim, false)
			l.postFFNNorm = ld.vector(name("post_ffw_norm.weight"), p.Dim, false)
			if i%p.SlidingWindowPattern < p.SlidingWindowPattern-1 {
				l.window = p.SlidingWindow
			}
		}
		if p.Architecture == "phi3" { // gate and up fused in one matrix, gate first
			up := ld.matrix(name("ffn_up.weight"), 2*p.FFNDim, p.Dim)
			l.dense.down = ld.matrix(name("ffn_down.weight"), p.Dim, p.FFNDim)
			if up.Rows > 0 {
				l.dense.gateUp = []kernels.Matrix{up.Slice(0, p.FFNDim), up.Slice(p.FFNDim, 2*p.FFNDim)}
			}
			continue
		}
		if p.Experts > 0 {
			l.router = ld.matrix(name("ffn_gate_inp.weight"), p.Experts, p.Dim)
			gates := ld.experts(name("ffn_gate_exps.weight"), p.Experts, p.ExpertFFNDim, p.Dim)
			ups := ld.experts(name("ffn_up_exps.weight"), p.Experts, p.ExpertFFNDim, p.Dim)
			downs := ld.experts(name("ffn_down_exps.weight"), p.Experts, p.Dim, p.ExpertFFNDim)
			if gates != nil && ups != nil && downs != nil {
				l.experts = make([]ffn, p.Experts)
				for e := range l.experts {
					l.experts[e] = ffn{gateUp: []kernels.Matrix{gates[e], ups[e]}, down: downs[e]}
				}
			}
			if p.SharedFFNDim > 0 {
				l.sharedGate = ld.vector(name("ffn_gate_inp_shexp.weight"), p.Dim, false)
				l.shared = ffn{
					gateUp: []kernels.Matrix{
						ld.matrix(name("ffn_gate_shexp.weight"), p.SharedFFNDim, p.Dim),
						ld.matrix(name("ffn_up_shexp.weight"), p.SharedFFNDim, p.Dim),
					},
					down: ld.matrix(name("ffn_down_shexp.weight"), p.Dim, p.SharedFFNDim),
				}
			}
			continue
		}
		l.dense = ffn{
			gateUp: []kernels.Matrix{
				ld.matrix(name("ffn_gate.weight"), p.FFNDim, p.Dim),
				ld.matrix(name("ffn_up.weight"), p.FFNDim, p.Dim),
			},
			down: ld.matrix(name("ffn_down.weight"), p.Dim, p.FFNDim),
		}
	}
	if err := ld.err(); err != nil {
		return err
	}
	if !m.opts.NoRepack {
		m.pack()
	}
	for i := range m.layers {
		l := &m.layers[i]
		l.qkv = []kernels.Matrix{l.wq, l.wk, l.wv}
	}
	m.embdRow = m.embd.RowBytes()
	return nil
}

// pack packs the matrices of every product for the kernels (kernels.Pack).
func (m *Model) pack() {
	m.output = kernels.Pack(m.output) // m.embd keeps the rows a token's embedding is read from
	packFFN := func(f *ffn) {
		for k := range f.gateUp {
			f.gateUp[k] = kernels.Pack(f.gateUp[k])
		}
		f.down = kernels.Pack(f.down)
	}
	for i := range m.layers {
		l := &m.layers[i]
		l.wq, l.wk, l.wv, l.wo = kernels.Pack(l.wq), kernels.Pack(l.wk), kernels.Pack(l.wv), kernels.Pack(l.wo)
		packFFN(&l.dense)
		packFFN(&l.shared)
		for e := range l.experts {
			packFFN(&l.experts[e])
		}
	}
}

// prefetch reads one byte of every page of the weights, reporting progress.
func (m *Model) prefetch() {
	var total int64
	for i := range m.file.Tensors {
		total += m.file.Tensors[i].Size
	}
	const page = 4096
	var done, reported int64
	var sink byte
	for i := range m.file.Tensors {
		data, err := m.file.TensorData(m.file.Tensors[i].Name)
		if err != nil {
			continue
		}
		for off := 0; off < len(data); off += page {
			sink += data[off]
		}
		done += int64(len(data))
		if m.opts.Progress != nil && (done-reported > total/100 || done == total) {
			m.opts.Progress("load", done, total)
			reported = done
		}
	}
	prefetchSink = sink
}

var prefetchSink byte

// Close releases the model's file when the model opened it (Open), after the forward passes
// in flight end. Forward and NewState fail with ErrClosed afterwards; the states made before
// may still be closed, forked or truncated, and a second Close does nothing.
func (m *Model) Close() error {
	m.life.Lock()
	defer m.life.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.own {
		return m.file.Close()
	}
	return nil
}

// ErrClosed is the error of Forward and NewState on a model after its Close.
var ErrClosed = errors.New("llama: the model is closed")

// Params returns the model's hyper-parameters.
func (m *Model) Params() Params { return m.p }

// Cache returns the pool of the model's KV cache (for statistics).
func (m *Model) Cache() *cache.Pool { return m.pool }

// ReserveKV allocates and faults in the KV cache that sequences sequences of the model's full
// context fill, within its KV budget (cache.Pool.Reserve), and returns the bytes it reserved. A
// server calls it at startup for its most running requests, so that no request's forward pass
// waits for fresh memory.
func (m *Model) ReserveKV(sequences int) int64 {
	bs := m.pool.Config().BlockSize
	blocks := sequences * ((m.p.ContextLength + bs - 1) / bs)
	return int64(m.pool.Reserve(blocks)) * m.pool.BlockBytes()
}

// File returns the GGUF file the model reads its weights from.
func (m *Model) File() *gguf.File { return m.file }

// WeightBytes returns the bytes of all tensors of the model's file.
func (m *Model) WeightBytes() int64 {
	var n int64
	for i := range m.file.Tensors {
		n += m.file.Tensors[i].Size
	}
	return n
}

// Config implements core.Model.
func (m *Model) Config() core.ModelConfig {
	name := m.p.Name
	if name == "" && m.file.Path() != "" {
		name = m.file.Path()
	}
	return core.ModelConfig{
		Name:          name,
		Architecture:  m.p.Architecture,
		VocabSize:     m.p.VocabSize,
		ContextLength: m.p.ContextLength,
	}
}
