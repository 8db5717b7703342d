"""An independent float64 forward of the gemma3 architecture (the text model), written from its
published definition (Hugging Face transformers' Gemma3 text model): token embeddings scaled by
sqrt(hidden size); per layer RMSNorm, attention with RMSNorm on every query and key head before
rotary embeddings (NeoX layout), grouped-query attention with scores scaled by
query_pre_attn_scalar^-0.5 (here the head width), a sliding window on five layers of six (layer
i is global when (i + 1) % 6 == 0) whose rotary base is 10 000 unscaled while global layers use
rope.freq_base with linear scaling, RMSNorm of the attention output before the residual, the
same around a GELU (tanh) gated feed-forward network, a final RMSNorm and tied output, no soft
caps. The GGUF file stores RMSNorm weights with Gemma's +1 already added, so they multiply as
they are. Run on a model file along a fixed path of ids:

    PYTHONPATH=<llama.cpp>/gguf-py python3 reference.py tinygemma3-f32.gguf 40

writes NAME.txt (PROMPT and GEN ids: a forced path) and NAME.logits.f32 (the float32 logits
before each GEN id). Needs NumPy and llama.cpp's gguf package, only to regenerate; the Go test
reads the files.
"""
import sys
import numpy as np
from gguf import GGUFReader

path, steps = sys.argv[1], int(sys.argv[2])
r = GGUFReader(path)

def value(key):
    f = r.fields[key]
    return f.parts[f.data[0]][0]

def string(key):
    f = r.fields[key]
    return bytes(f.parts[f.data[0]]).decode()

arch = string("general.architecture")
assert arch == "gemma3", arch
dim = int(value(f"{arch}.embedding_length"))
layers = int(value(f"{arch}.block_count"))
heads = int(value(f"{arch}.attention.head_count"))
kv_heads = int(value(f"{arch}.attention.head_count_kv"))
eps = float(value(f"{arch}.attention.layer_norm_rms_epsilon"))
base = float(value(f"{arch}.rope.freq_base"))
window = int(value(f"{arch}.attention.sliding_window"))
factor = float(value(f"{arch}.rope.scaling.factor")) if string(f"{arch}.rope.scaling.type") == "linear" else 1.0
hd = dim // heads
W = {t.name: np.array(t.data, dtype=np.float64) for t in r.tensors}

def rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w

def rope(x, pos, b, scale):  # x: (T, H, hd), NeoX layout; positions divided by scale
    half = hd // 2
    inv = b ** (-np.arange(half) * 2.0 / hd)
    ang = (pos / scale)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

def forward(ids):
    T = len(ids)
    x = W["token_embd.weight"][ids] * np.sqrt(dim)
    pos = np.arange(T, dtype=np.float64)
    causal = np.triu(np.full((T, T), -np.inf), 1)
    local = causal + np.tril(np.full((T, T), -np.inf), -window)  # j ≤ i - window masked
    for l in range(layers):
        p = f"blk.{l}."
        sliding = (l + 1) % 6 != 0
        h = rmsnorm(x, W[p + "attn_norm.weight"])
        q = (h @ W[p + "attn_q.weight"].T).reshape(T, heads, hd)
        k = (h @ W[p + "attn_k.weight"].T).reshape(T, kv_heads, hd)
        v = (h @ W[p + "attn_v.weight"].T).reshape(T, kv_heads, hd)
        b, scale = (10000.0, 1.0) if sliding else (base, factor)
        q = rope(rmsnorm(q, W[p + "attn_q_norm.weight"]), pos, b, scale)
        k = rope(rmsnorm(k, W[p + "attn_k_norm.weight"]), pos, b, scale)
        mask = local if sliding else causal
        out = np.zeros((T, heads, hd))
        for hh in range(heads):
            g = hh // (heads // kv_heads)
            s = q[:, hh, :] @ k[:, g, :].T * hd ** -0.5 + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            out[:, hh, :] = s @ v[:, g, :]
        a = out.reshape(T, dim) @ W[p + "attn_output.weight"].T
        x = x + rmsnorm(a, W[p + "post_attention_norm.weight"])
        h = rmsnorm(x, W[p + "ffn_norm.weight"])
        f = (gelu(h @ W[p + "ffn_gate.weight"].T) * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
        x = x + rmsnorm(f, W[p + "post_ffw_norm.weight"])
    x = rmsnorm(x[-1], W["output_norm.weight"])
    return x @ W["token_embd.weight"].T

# The random weights make greedy decoding repeat one token, so the path is forced instead: a
# fixed varied sequence of ids, the logits recorded before each.
prompt = [1, 268, 265, 17, 270, 42, 271, 260]
vocab = W["token_embd.weight"].shape[0]
ids, gen, rows = list(prompt), [], []
for i in range(steps):
    logits = forward(ids)
    t = (37 * i + 11) % vocab
    rows.append(logits.astype(np.float32))
    gen.append(t)
    ids.append(t)
stem = path[: -len(".gguf")]
with open(stem + ".txt", "w") as f:
    f.write("PROMPT " + " ".join(map(str, prompt)) + "\n")
    f.write("GEN " + " ".join(map(str, gen)) + "\n")
np.stack(rows).astype("<f4").tofile(stem + ".logits.f32")
print("GEN", gen)
