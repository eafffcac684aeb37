"""Reference word splits for the Llama 3 and Qwen 2 pre-tokenizers, from Hugging Face `tokenizers`.

Each model's tokenizer.json runs `Split(Regex(P), behavior="isolated")` then a byte-level map;
this records the Split's words (as text) for every case. Run from the repository root:
    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install tokenizers
    /tmp/venv/bin/python tests/data/pretokenize/make_splits.py
"""
import json
import random

import tokenizers
from tokenizers import Regex, pre_tokenizers

# The patterns as the models' tokenizer.json files state them.
PATTERNS = {
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}

WRITTEN = [
    "Hello world 12345", "x\n\n  y", "don't WE'VE I'M they'll", "  leading and trailing   ",
    "a\tb \t c\r\n d", "v2.0.1-rc3 costs $1,234.56", "café naïve 日本語です。", "a 😀🚀 b", "x½٣ 2²",
    "def f(x):\n    return x**2\n\n\n", "''s 'S 'll 'LL", "hi!!! ?\n\n!", "", " ", "\n", "1 22 333 4444 55555",
]

ALPHABET = list("abcXYZ é日😀 \n\t\r'!?.,-_1234567890½") + ["'s", "'LL", "  ", "\n\n", "://"]


def random_cases(n, seed=7):
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 24))) for _ in range(n)]


def main():
    cases = WRITTEN + random_cases(200)
    out = {"tokenizers_version": tokenizers.__version__, "patterns": PATTERNS, "cases": []}
    splitters = {name: pre_tokenizers.Split(Regex(p), behavior="isolated") for name, p in PATTERNS.items()}
    for text in cases:
        row = {"text": text}
        for name, split in splitters.items():
            row[name] = [w for w, _ in split.pre_tokenize_str(text)]
        out["cases"].append(row)
    with open("tests/data/pretokenize/splits.json", "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)


if __name__ == "__main__":
    main()
