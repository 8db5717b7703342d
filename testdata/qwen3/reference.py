"""An independent float64 forward of the qwen3 and qwen3moe architectures, written from their
published definitions (Hugging Face transformers' Qwen3 and Qwen3-MoE models: RMSNorm on every
query and key head before rotary embeddings, NeoX-style rotation, grouped-query attention, a
SwiGLU feed-forward network — for qwen3moe a mixture of experts: softmax over the router, the
top-k experts, their probabilities renormalised to sum to 1 (norm_topk_prob), no shared expert
— tied output), run on a model file along a fixed path of ids.

    PYTHONPATH=<llama.cpp>/gguf-py python3 reference.py tinyqwen3-f32.gguf 32
    PYTHONPATH=<llama.cpp>/gguf-py python3 reference.py ../qwen3moe/tinyqwen3moe-f32.gguf 32

writes NAME.txt (PROMPT and GEN ids: a forced path) and NAME.logits.f32 (the float32 logits
before each GEN id) beside the model. Needs NumPy and llama.cpp's gguf package, only to
regenerate; the Go tests read the files.
"""
import sys
import numpy as np
from gguf import GGUFReader

path, steps = sys.argv[1], int(sys.argv[2])
r = GGUFReader(path)

def value(key):
    f = r.fields[key]
    return f.parts[f.data[0]][0]

f = r.fields["general.architecture"]
arch = bytes(f.parts[f.data[0]]).decode()
dim = int(value(f"{arch}.embedding_length"))
layers = int(value(f"{arch}.block_count"))
heads = int(value(f"{arch}.attention.head_count"))
kv_heads = int(value(f"{arch}.attention.head_count_kv"))
eps = float(value(f"{arch}.attention.layer_norm_rms_epsilon"))
base = float(value(f"{arch}.rope.freq_base"))
hd = dim // heads
used = int(value(f"{arch}.expert_used_count")) if arch == "qwen3moe" else 0
W = {t.name: np.array(t.data, dtype=np.float64) for t in r.tensors}

def rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w

def rope(x, pos):  # x: (T, H, hd), NeoX layout: first half against second half
    half = hd // 2
    inv = base ** (-np.arange(half) * 2.0 / hd)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

def moe(h, p):  # h: (T, dim)
    logits = h @ W[p + "ffn_gate_inp.weight"].T  # (T, experts)
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        top = np.argsort(-probs[t], kind="stable")[:used]
        w = probs[t, top] / probs[t, top].sum()
        for e, we in zip(top, w):
            gate = W[p + "ffn_gate_exps.weight"][e] @ h[t]
            up = W[p + "ffn_up_exps.weight"][e] @ h[t]
            out[t] += we * (W[p + "ffn_down_exps.weight"][e] @ (gate / (1 + np.exp(-gate)) * up))
    return out

def forward(ids):
    T = len(ids)
    x = W["token_embd.weight"][ids]
    pos = np.arange(T, dtype=np.float64)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(layers):
        p = f"blk.{l}."
        h = rmsnorm(x, W[p + "attn_norm.weight"])
        q = (h @ W[p + "attn_q.weight"].T).reshape(T, heads, hd)
        k = (h @ W[p + "attn_k.weight"].T).reshape(T, kv_heads, hd)
        v = (h @ W[p + "attn_v.weight"].T).reshape(T, kv_heads, hd)
        q = rope(rmsnorm(q, W[p + "attn_q_norm.weight"]), pos)
        k = rope(rmsnorm(k, W[p + "attn_k_norm.weight"]), pos)
        out = np.zeros((T, heads, hd))
        for hh in range(heads):
            g = hh // (heads // kv_heads)
            s = q[:, hh, :] @ k[:, g, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            out[:, hh, :] = s @ v[:, g, :]
        x = x + out.reshape(T, dim) @ W[p + "attn_output.weight"].T
        h = rmsnorm(x, W[p + "ffn_norm.weight"])
        if arch == "qwen3moe":
            x = x + moe(h, p)
        else:
            gate = h @ W[p + "ffn_gate.weight"].T
            up = h @ W[p + "ffn_up.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ W[p + "ffn_down.weight"].T
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
