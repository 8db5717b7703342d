"""Trains one Llama-architecture model on the encoded corpus and exports it to GGUF.

The model is the Llama architecture as llama.cpp runs it for general.architecture = "llama":
RMSNorm before attention and before the feed-forward, grouped-query attention, rotary position
embedding over adjacent pairs (x[2i], x[2i+1]) — the layout of Meta's original checkpoints and of
llama.cpp's rope for "llama", so Q and K rows are exported as they are, with no permutation —
SwiGLU feed-forward, tied input/output embeddings (no output.weight in the file).

usage: train.py NAME DATA_DIR OUT_DIR   (NAME is one of CONFIGS)
writes OUT_DIR/NAME.gguf, OUT_DIR/NAME.train.json (training time and tokens), OUT_DIR/NAME.json
(metrics and samples) and the greedy reference continuation OUT_DIR/NAME.greedy.txt. With RESUME=1
in the environment, a model already trained into OUT_DIR is evaluated again, not retrained.
"""

import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import bpe
import gguf

CONFIGS = {
    # ~5.5M parameters. Steps: (count, batch, sequence length); most of the training is on
    # sequences of 256 tokens, which is faster, and the end on full 512-token contexts.
    "default": dict(dim=256, layers=6, heads=4, kv_heads=2, ffn=704, context=512,
                    lr=1.5e-3, phases=[(1200, 12, 256), (150, 6, 512)]),
    # ~0.6M parameters, same tokenizer and data.
    "draft": dict(dim=96, layers=2, heads=3, kv_heads=1, ffn=256, context=512,
                  lr=3e-3, phases=[(1200, 12, 256), (150, 6, 512)]),
}
SEED = 1234
ROPE_BASE = 10000.0
NORM_EPS = 1e-5
WARMUP = 100
# Prompts for the reference continuation. The one used is the one whose greedy continuation
# stays farthest from a near-tie: its smallest gap between the best and second-best logit is
# the largest, so that the runtime's different summation order cannot flip an argmax.
REFERENCE_PROMPTS = ["In the beginning God created", "The President said that", "Call me Ishmael.",
                     "And it came to pass", "The Congress",
                     "Fellow-Citizens of the Senate and House of Representatives:"]
REFERENCE_TOKENS = 64
MIN_MARGIN = 0.005
SAMPLE_PROMPTS = ["And God said", "The people of the United States", "The whale"]


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.weight


def rope(x, cos, sin):
    """Rotates adjacent pairs (x[2i], x[2i+1]) of the last dimension by position * theta_i."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, self.heads, self.kv_heads = c["dim"], c["heads"], c["kv_heads"]
        self.head_dim = d // self.heads
        self.attn_norm = RMSNorm(d)
        self.wq = nn.Linear(d, self.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(self.heads * self.head_dim, d, bias=False)
        self.ffn_norm = RMSNorm(d)
        self.w_gate = nn.Linear(d, c["ffn"], bias=False)
        self.w_up = nn.Linear(d, c["ffn"], bias=False)
        self.w_down = nn.Linear(c["ffn"], d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, D = x.shape
        H, G, hd = self.heads, self.kv_heads, self.head_dim
        h = self.attn_norm(x)
        q = rope(self.wq(h).view(B, T, H, hd).transpose(1, 2), cos, sin)
        k = rope(self.wk(h).view(B, T, G, hd).transpose(1, 2), cos, sin)
        v = self.wv(h).view(B, T, G, hd).transpose(1, 2)
        # Query head i uses key/value head i // (H/G). The query heads of one group are
        # stacked along the rows so that one batched matmul serves the whole group.
        r = H // G
        qg = q.reshape(B * G, r * T, hd)
        kt = k.reshape(B * G, T, hd).transpose(1, 2).contiguous()
        att = torch.bmm(qg, kt).view(B * G, r, T, T) * (1.0 / math.sqrt(hd)) + mask
        a = torch.bmm(att.softmax(-1).view(B * G, r * T, T), v.reshape(B * G, T, hd))
        x = x + self.wo(a.view(B, H, T, hd).transpose(1, 2).reshape(B, T, H * hd))
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(nn.Module):
    def __init__(self, c, vocab):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(vocab, c["dim"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["dim"])
        hd = c["dim"] // c["heads"]
        inv = 1.0 / (ROPE_BASE ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        angles = torch.outer(torch.arange(c["context"], dtype=torch.float64), inv)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)
        self.register_buffer("mask", torch.full((c["context"], c["context"]), float("-inf")).triu(1), persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if name.endswith("wo.weight") or name.endswith("w_down.weight"):
                    std /= math.sqrt(2 * c["layers"])
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.embed(idx)
        for b in self.blocks:
            x = b(x, self.cos[:T], self.sin[:T], self.mask[:T, :T])
        return self.norm(x) @ self.embed.weight.t()


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def batches(data, rng, batch, seq):
    starts = rng.integers(0, len(data) - seq - 1, size=batch)
    x = np.stack([data[s:s + seq + 1] for s in starts]).astype(np.int64)
    t = torch.from_numpy(x)
    return t[:, :-1], t[:, 1:]


@torch.no_grad()
def evaluate(model, data, seq, limit=None):
    """Mean cross-entropy (nats per token) over consecutive windows of the split."""
    model.eval()
    total, count = 0.0, 0
    n = (len(data) - 1) // seq
    if limit:
        n = min(n, limit)
    for i in range(0, n, 8):
        rows = [data[j * seq:j * seq + seq + 1] for j in range(i, min(n, i + 8))]
        x = torch.from_numpy(np.stack(rows).astype(np.int64))
        logits = model(x[:, :-1])
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum").item()
        count += x[:, 1:].numel()
    model.train()
    return total / count


def train(name, c, train_data, valid_data, vocab):
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    model = Llama(c, vocab)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=c["lr"], betas=(0.9, 0.95), eps=1e-8)
    total_steps = sum(p[0] for p in c["phases"])
    print(f"{name}: {n_params(model)} parameters, {total_steps} steps", flush=True)
    start, step, tokens = time.time(), 0, 0
    for steps, batch, seq in c["phases"]:
        for _ in range(steps):
            lr = c["lr"] * min(1.0, (step + 1) / WARMUP)
            lr *= 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / total_steps)))
            for g in opt.param_groups:
                g["lr"] = lr
            x, y = batches(train_data, rng, batch, seq)
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            tokens += x.numel()
            if step % 50 == 0 or step == total_steps:
                el = time.time() - start
                msg = f"{name}: step {step}/{total_steps} seq {seq} loss {loss.item():.3f} lr {lr:.2e} {tokens / el:.0f} tok/s {el / 60:.1f} min"
                if step % 400 == 0:
                    msg += f" valid {evaluate(model, valid_data, 256, limit=48):.3f}"
                print(msg, flush=True)
    return model, time.time() - start, tokens


def export(path, model, tok, name):
    c = model.c
    hd = c["dim"] // c["heads"]
    vocab = tok.vocab_size
    metadata = {
        "general.architecture": "llama",
        "general.name": f"loom-{name}",
        "general.file_type": gguf.UInt32(1),  # mostly F16
        "general.alignment": gguf.UInt32(gguf.ALIGNMENT),
        "llama.vocab_size": gguf.UInt32(vocab),
        "llama.context_length": gguf.UInt32(c["context"]),
        "llama.embedding_length": gguf.UInt32(c["dim"]),
        "llama.block_count": gguf.UInt32(c["layers"]),
        "llama.feed_forward_length": gguf.UInt32(c["ffn"]),
        "llama.rope.dimension_count": gguf.UInt32(hd),
        "llama.attention.head_count": gguf.UInt32(c["heads"]),
        "llama.attention.head_count_kv": gguf.UInt32(c["kv_heads"]),
        "llama.attention.layer_norm_rms_epsilon": gguf.Float32(NORM_EPS),
        "llama.rope.freq_base": gguf.Float32(ROPE_BASE),
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",  # llama.cpp's name for the GPT-2 pre-tokenizer
        "tokenizer.ggml.tokens": tok.token_strings(),
        "tokenizer.ggml.token_type": [gguf.Int32(1)] * (vocab - 1) + [gguf.Int32(3)],
        "tokenizer.ggml.merges": tok.merge_strings(),
        "tokenizer.ggml.bos_token_id": gguf.UInt32(tok.end_of_text),
        "tokenizer.ggml.eos_token_id": gguf.UInt32(tok.end_of_text),
        "tokenizer.ggml.add_bos_token": True,
        "tokenizer.ggml.add_eos_token": False,
    }

    def f16(t):
        return t.detach().numpy().astype(np.float16)

    def f32(t):
        return t.detach().numpy().astype(np.float32)

    tensors = [("token_embd.weight", f16(model.embed.weight))]
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        tensors += [
            (p + "attn_norm.weight", f32(b.attn_norm.weight)),
            (p + "attn_q.weight", f16(b.wq.weight)),
            (p + "attn_k.weight", f16(b.wk.weight)),
            (p + "attn_v.weight", f16(b.wv.weight)),
            (p + "attn_output.weight", f16(b.wo.weight)),
            (p + "ffn_norm.weight", f32(b.ffn_norm.weight)),
            (p + "ffn_gate.weight", f16(b.w_gate.weight)),
            (p + "ffn_up.weight", f16(b.w_up.weight)),
            (p + "ffn_down.weight", f16(b.w_down.weight)),
        ]
    tensors.append(("output_norm.weight", f32(model.norm.weight)))
    gguf.write(path, metadata, tensors)


def load(path):
    """Builds the PyTorch model from a GGUF file written by export (weights as stored)."""
    md, t = gguf.read(path)
    c = dict(dim=md["llama.embedding_length"], layers=md["llama.block_count"], heads=md["llama.attention.head_count"],
             kv_heads=md["llama.attention.head_count_kv"], ffn=md["llama.feed_forward_length"],
             context=md["llama.context_length"])
    model = Llama(c, md["llama.vocab_size"])

    def put(p, name):
        p.data = torch.from_numpy(t[name].astype(np.float32))

    put(model.embed.weight, "token_embd.weight")
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        put(b.attn_norm.weight, p + "attn_norm.weight")
        put(b.wq.weight, p + "attn_q.weight")
        put(b.wk.weight, p + "attn_k.weight")
        put(b.wv.weight, p + "attn_v.weight")
        put(b.wo.weight, p + "attn_output.weight")
        put(b.ffn_norm.weight, p + "ffn_norm.weight")
        put(b.w_gate.weight, p + "ffn_gate.weight")
        put(b.w_up.weight, p + "ffn_up.weight")
        put(b.w_down.weight, p + "ffn_down.weight")
    put(model.norm.weight, "output_norm.weight")
    model.eval()
    return model, md


@torch.no_grad()
def generate(model, ids, n, temperature=0.0, top_p=1.0, gen=None, stop=None):
    """Greedy when temperature is 0, else temperature then top-p (keeps the token that crosses
    p). Returns (new ids, smallest top-1 minus top-2 logit margin seen)."""
    ids = list(ids)
    out, margin = [], float("inf")
    for _ in range(n):
        logits = model(torch.tensor([ids[-model.c["context"]:]]))[0, -1].double()
        top2 = torch.topk(logits, 2).values
        margin = min(margin, (top2[0] - top2[1]).item())
        if temperature == 0:
            t = int(torch.argmax(logits))
        else:
            probs = torch.softmax(logits / temperature, -1)
            sp, si = torch.sort(probs, descending=True)
            keep = int((torch.cumsum(sp, 0) < top_p).sum()) + 1
            sp = sp[:keep] / sp[:keep].sum()
            t = int(si[torch.multinomial(sp.float(), 1, generator=gen)])
        ids.append(t)
        out.append(t)
        if t == stop:
            break
    return out, margin


@torch.no_grad()
def acceptance(target, draft, data, seq=256, windows=16):
    """On validation text: how often the draft's argmax equals the target's, and the expected
    acceptance rate of speculative sampling at T = 1, the mean of sum_x min(p(x), q(x))."""
    greedy, sampled, n = 0.0, 0.0, 0
    for j in range(windows):
        x = torch.from_numpy(data[j * seq:(j + 1) * seq].astype(np.int64))[None]
        p = torch.softmax(target(x)[0].double(), -1)
        q = torch.softmax(draft(x)[0].double(), -1)
        greedy += (p.argmax(-1) == q.argmax(-1)).sum().item()
        sampled += torch.minimum(p, q).sum(-1).sum().item()
        n += seq
    return greedy / n, sampled / n


def main():
    """Trains (unless RESUME=1 and the model was already trained into OUT_DIR), exports, then
    evaluates the exported file and writes the reference continuation and the report."""
    name, data_dir, out = sys.argv[1], sys.argv[2], sys.argv[3]
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "2")))
    with open(os.path.join(data_dir, "merges.json")) as f:
        tok = bpe.Tokenizer([tuple(m) for m in json.load(f)["merges"]])
    train_data = np.load(os.path.join(data_dir, "train.npy"))
    valid_data = np.load(os.path.join(data_dir, "valid.npy"))
    c = CONFIGS[name]
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name + ".gguf")
    trained = os.path.join(out, name + ".train.json")
    if os.environ.get("RESUME") == "1" and os.path.exists(path) and os.path.exists(trained):
        print(f"{name}: reusing {path}", flush=True)
    else:
        model, seconds, tokens = train(name, c, train_data, valid_data, tok.vocab_size)
        export(path, model, tok, name)
        with open(trained, "w") as f:
            json.dump(dict(train_seconds=round(seconds), train_tokens=tokens), f)
    with open(trained) as f:
        report = json.load(f)
    finish(name, path, out, c, tok, valid_data, report)


def finish(name, path, out, c, tok, valid_data, report):
    # Everything here runs on the weights as the file stores them.
    model, _ = load(path)
    loss = evaluate(model, valid_data, c["context"])
    print(f"{name}: validation loss {loss:.4f} nats/token, perplexity {math.exp(loss):.2f}", flush=True)
    report = dict(name=name, parameters=n_params(model), config={k: v for k, v in c.items()}, **report,
                  valid_loss=round(loss, 4), valid_perplexity=round(math.exp(loss), 2),
                  file_bytes=os.path.getsize(path), samples=[])
    eot = tok.end_of_text
    for prompt in SAMPLE_PROMPTS:
        ids = [eot] + tok.encode(prompt)
        g, _ = generate(model, ids, 80, stop=eot)
        gen = torch.Generator().manual_seed(SEED)
        s, _ = generate(model, ids, 80, temperature=0.8, top_p=0.95, gen=gen, stop=eot)
        report["samples"].append(dict(prompt=prompt, greedy=tok.decode(g), sampled=tok.decode(s)))
        print(f"{name}: greedy  | {prompt}{tok.decode(g)!r}", flush=True)
        print(f"{name}: T=0.8   | {prompt}{tok.decode(s)!r}", flush=True)
    if name == "draft" and os.path.exists(os.path.join(out, "default.gguf")):
        target, _ = load(os.path.join(out, "default.gguf"))
        g, s = acceptance(target, model, valid_data)
        report["acceptance_greedy"], report["acceptance_sampled"] = round(g, 4), round(s, 4)
        print(f"{name}: agrees with the target's argmax on {g:.1%} of validation tokens; "
              f"expected acceptance of speculative sampling at T=1: {s:.1%}", flush=True)
    refs = []
    for prompt in REFERENCE_PROMPTS:
        ids = [eot] + tok.encode(prompt)
        cont, margin = generate(model, ids, REFERENCE_TOKENS, stop=eot)
        print(f"{name}: reference candidate {prompt!r}: smallest logit gap {margin:.4f}", flush=True)
        if margin >= MIN_MARGIN:
            refs.append((margin, prompt, ids, cont))
    if not refs:
        raise SystemExit(f"{name}: every reference continuation has a near-tie (gap < {MIN_MARGIN})")
    with open(os.path.join(out, name + ".greedy.txt"), "w") as f:
        f.write(f"# Greedy continuations by the trainer (PyTorch, float32 over the weights stored in {name}.gguf)\n")
        f.write(f"# of the reference prompts whose smallest gap between the best and second-best logit along\n")
        f.write(f"# the way (margin) is at least {MIN_MARGIN}. Records are separated by blank lines.\n")
        for margin, prompt, ids, cont in refs:
            f.write(f"\nprompt: {json.dumps(prompt)}\n")
            f.write(f"margin: {margin:.4f}\n")
            f.write("prompt_ids: " + " ".join(map(str, ids)) + "\n")
            f.write("continuation_ids: " + " ".join(map(str, cont)) + "\n")
            f.write(f"continuation: {json.dumps(tok.decode(cont))}\n")
    report["reference"] = [dict(prompt=p, margin=round(m, 4), continuation=tok.decode(c)) for m, p, _, c in refs]
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"{name}: wrote {path} ({report['file_bytes']} bytes)", flush=True)


if __name__ == "__main__":
    main()
