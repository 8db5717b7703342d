"""Trains the byte-level BPE tokenizer on the training split and encodes both splits.

usage: tokenize_corpus.py CORPUS_DIR VOCAB_SIZE OUT_DIR
writes OUT_DIR/merges.json, OUT_DIR/train.npy, OUT_DIR/valid.npy (uint16 token ids; every
document is preceded by <|endoftext|>, as the runtime prepends it as BOS to a prompt).
"""

import json
import os
import sys
import time

import numpy as np

import bpe
from corpus import SEPARATOR


def documents(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n" + SEPARATOR + "\n")


def main():
    corpus, vocab_size, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(out, exist_ok=True)
    start = time.time()
    train_docs = documents(os.path.join(corpus, "train.txt"))
    merges = bpe.train(train_docs, vocab_size)
    tok = bpe.Tokenizer(merges)
    assert tok.vocab_size == vocab_size
    with open(os.path.join(out, "merges.json"), "w") as f:
        json.dump({"merges": merges}, f)
    for split, docs in (("train", train_docs), ("valid", documents(os.path.join(corpus, "valid.txt")))):
        ids = []
        for d in docs:
            ids.append(tok.end_of_text)
            ids.extend(tok.encode(d))
        a = np.asarray(ids, dtype=np.uint16)
        np.save(os.path.join(out, split + ".npy"), a)
        chars = sum(len(d) for d in docs)
        print(f"tokenizer: {split}: {len(a)} tokens, {chars / len(a):.2f} characters per token", flush=True)
    print(f"tokenizer: {vocab_size} tokens trained and corpus encoded in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
