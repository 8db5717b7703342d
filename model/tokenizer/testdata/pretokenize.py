# Generates pretokenize.json: how the original regular expressions of each pre-tokenizer
# split a set of tricky texts, computed with a backtracking regex engine (Python's "regex"
# module, whose \s is Unicode White_Space like Go's unicode.IsSpace). The Go scanners in
# pretokenize.go must split every text the same way.
#
#   python3 pretokenize.py > pretokenize.json
import json
import random

import regex

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

# Each pre-tokenizer is a list of expressions applied in turn: every match of one becomes a
# piece, and so does the text between matches; the next expression splits each piece again.
PRE = {
    "gpt-2": [GPT2],
    "llama-bpe": [LLAMA3],
    "qwen2": [QWEN2],
    "smollm": [r"\p{N}", GPT2],
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
}


def split(exprs, text):
    pieces = [text] if text else []
    for e in exprs:
        out = []
        for p in pieces:
            at = 0
            for m in regex.finditer(e, p):
                if m.start() > at:
                    out.append(p[at:m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                at = m.end()
            if at < len(p):
                out.append(p[at:])
        pieces = out
    return pieces


TEXTS = [
    "", " ", "  ", "\t", "\n", "\r\n", "\n\n\n", " \n", "\n ", " \n \n ", "\t\n x", "x  \n  y",
    "Hello world", " Hello  World!  ", "hi   ", "   hi", "don't", "I'M HERE", "they'RE 'll 'Ve",
    "'hello", "''s", "'", "a'", "''''", "O'Neil's", "12345", " 12345", "1 22 333 4444",
    "3.14159", "٣٤٥٦٧", "Ⅻ ½ ²", "x²", "e\u0301t\u0301e", "a\u0301b", "\u0301", "(hello)",
    "!!\n\n", " ?!\r\n", "foo.\n\nbar", "$100 + <x> = ^y~|z", "a\u00a0b", "a\u00a0\u00a0b",
    "\u3000x", "中文字符", "日本語のテキスト", "한국어", "Привет, мир!", "🦙🦙 llama",
    "👨\u200d👩\u200d👧", "tab\tsep\t\tx", "trailing\n", "\r\r\n\r", "   \t  ", "x\u2028y",
    "@user #tag https://example.org/a?b=c", "snake_case and camelCase42",
    "ied 4 ½ months", "Führer", "w048 7tuijk dsdfhu", "Hello, y'all! How are you 😁 ?",
    "\u00a0\n", " \u00a0x", "a\u0085b", "\x00\x01", "...", " ...", "--==", "''''''```````",
]

ALPHABET = ["a", "Z", "é", "ß", "中", "1", "٣", "½", " ", " ", " ", "\t", "\n", "\r", "\u00a0",
            "\u3000", "'", "s", "S", "l", "L", "r", "e", "!", ".", "?", "😀", "\u0301", "\u200d",
            "$", "+", "<", "~", "|", "-", "_", "(", "0"]

rng = random.Random(20240603)
for _ in range(400):
    TEXTS.append("".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 24))))

cases = [{"pre": name, "text": t, "pieces": split(exprs, t)} for name, exprs in PRE.items() for t in TEXTS]
print("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]")
