"""Byte-level BPE, GPT-2 style: training, encoding and decoding.

The vocabulary is what GPT-2's tokenizer.json and llama.cpp's "gpt2" tokenizer use:
  - every byte is a token, spelled with GPT-2's byte-to-unicode map (the space byte is "Ġ");
  - merges are ranked; encoding a word repeatedly merges the adjacent pair of lowest rank;
  - text is first split by the "gpt2" pre-tokenizer regex, and merges never cross its pieces;
  - special tokens (here only <|endoftext|>) are whole tokens that the pre-tokenizer never makes.

Token ids: 0..255 are the bytes in byte order, then one token per merge in rank order, then the
special tokens.
"""

import collections
import heapq

import regex

GPT2_PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

END_OF_TEXT = "<|endoftext|>"


def bytes_to_unicode():
    """GPT-2's reversible map from bytes to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_UNICODE = bytes_to_unicode()
UNICODE_TO_BYTE = {c: b for b, c in BYTE_TO_UNICODE.items()}


def pretokenize(text):
    return GPT2_PATTERN.findall(text)


def train(texts, vocab_size, log=print):
    """Learns vocab_size - 256 - 1 merges from an iterable of texts; returns the merges as
    pairs of token ids. Ties between pairs of equal count go to the smaller (left, right) ids,
    so training is deterministic."""
    counts = collections.Counter()
    for text in texts:
        counts.update(pretokenize(text))
    words = [list(w.encode("utf-8")) for w in counts]
    freqs = [counts[w] for w in counts]
    log(f"bpe: {sum(freqs)} words, {len(words)} distinct")

    pair_count = collections.defaultdict(int)
    where = collections.defaultdict(set)
    for i, (w, f) in enumerate(zip(words, freqs)):
        for p in zip(w, w[1:]):
            pair_count[p] += f
            where[p].add(i)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)

    merges = []
    n_merges = vocab_size - 256 - 1
    while len(merges) < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negc or negc == 0:
            continue  # stale entry
        new_id = 256 + len(merges)
        merges.append(pair)
        changed = set()
        for i in sorted(where.pop(pair)):
            w, f = words[i], freqs[i]
            for p in zip(w, w[1:]):
                pair_count[p] -= f
                changed.add(p)
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == pair[0] and w[j + 1] == pair[1]:
                    out.append(new_id)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for p in zip(out, out[1:]):
                pair_count[p] += f
                where[p].add(i)
                changed.add(p)
        pair_count.pop(pair, None)
        for p in changed:
            c = pair_count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p))
            else:
                pair_count.pop(p, None)
        if len(merges) % 500 == 0:
            log(f"bpe: {len(merges)} merges")
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = merges
        self.pieces = [bytes([b]) for b in range(256)]
        for a, b in merges:
            self.pieces.append(self.pieces[a] + self.pieces[b])
        self.rank = {p: r for r, p in enumerate(merges)}
        self.end_of_text = len(self.pieces)
        self.cache = {}

    @property
    def vocab_size(self):
        return len(self.pieces) + 1

    def token_strings(self):
        """Tokens spelled as GPT-2 spells them (byte-to-unicode), then the special token."""
        return ["".join(BYTE_TO_UNICODE[b] for b in p) for p in self.pieces] + [END_OF_TEXT]

    def merge_strings(self):
        s = self.token_strings()
        return [s[a] + " " + s[b] for a, b in self.merges]

    def encode_word(self, word):
        ids = self.cache.get(word)
        if ids is not None:
            return ids
        ids = list(word.encode("utf-8"))
        while len(ids) > 1:
            best, at = None, -1
            for j, p in enumerate(zip(ids, ids[1:])):
                r = self.rank.get(p)
                if r is not None and (best is None or r < best):
                    best, at = r, j
            if best is None:
                break
            pair = self.merges[best]
            new_id = 256 + best
            out, j = [], 0
            while j < len(ids):
                if j + 1 < len(ids) and ids[j] == pair[0] and ids[j + 1] == pair[1]:
                    out.append(new_id)
                    j += 2
                else:
                    out.append(ids[j])
                    j += 1
            ids = out
        self.cache[word] = ids
        return ids

    def encode(self, text):
        out = []
        for w in pretokenize(text):
            out.extend(self.encode_word(w))
        return out

    def decode(self, ids):
        return b"".join(self.pieces[i] for i in ids if i < len(self.pieces)).decode("utf-8", errors="replace")
