#!/usr/bin/env python3
"""Makes tests/data/gemma3/tokenize.json: reference token ids for Gemma 3 270M's vocabulary.

Two independent tokenizers are built from the GGUF's own vocabulary (its `tokenizer.ggml.*`
metadata, read with the `gguf` package), and run on every case of CASES:

- Hugging Face: transformers' GGUF tokenizer conversion (`convert_gguf_tokenizer`, the code
  `AutoTokenizer.from_pretrained(..., gguf_file=...)` runs), a `tokenizers` BPE with byte fallback.
  `ids_parse_special` is its `encode(text, add_special_tokens=False)`; `ids_no_parse_special` the
  same with `encode_special_tokens = True` (control tokens written in the text stay text, added
  non-special tokens such as "\\n" still match): llama.cpp's parse_special = true / false.
- SentencePiece: the `sentencepiece` library on a ModelProto rebuilt from the same pieces, scores
  and types (BPE, byte fallback, identity normalizer, no dummy prefix, as the GGUF's
  add_space_prefix = false). SentencePiece never matches control tokens in text, so for
  parse_special the text is first cut around control-token texts (longest first) and each piece
  encoded alone.

The two agree except on runs of more than 31 spaces (see README.md); both outputs are kept.
Then 300 seeded random texts (random_cases) get the same treatment.
Run from the repository root:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install transformers tokenizers gguf sentencepiece protobuf
    cargo run --release -- models --fetch gemma3-270m        # prints nothing on stdout; caches the GGUF
    /tmp/venv/bin/python tests/data/gemma3/make_tokenize.py "$ULTRA_CACHE/gemma-3-270m-q4_k_m.gguf"

transformers is used without torch: only its tokenizer conversion is imported.
"""

import hashlib
import json
import random
import re
import sys
from importlib.metadata import version
from pathlib import Path

import gguf
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb
from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer

CASES = [
    ("empty", ""),
    ("plain", "The quick brown fox jumps over the lazy dog."),
    ("leading_space", " Hello"),
    ("leading_spaces", "   Hello world"),
    ("trailing_spaces", "Hello world   "),
    ("inner_double_space", "Hello  world"),
    ("inner_spaces", "a   b    c     d"),
    ("only_space", " "),
    ("spaces_31", " " * 31),
    ("spaces_32", " " * 32),
    ("spaces_40", " " * 40),
    ("spaces_100_word", " " * 100 + "x"),
    ("newline", "line one\nline two"),
    ("newline_runs", "a\n\nb\n\n\nc\n\n\n\n\nd"),
    ("newlines_40", "\n" * 40),
    ("crlf", "one\r\ntwo\r\n\r\nthree\r"),
    ("space_newline_mix", "a \n b  \n\n  c\t\n"),
    ("tabs", "\tindented\n\t\tdouble\t tab  \t"),
    ("code", "def f(x):\n    return x * 2  # doubled\n\nprint(f(21))\n"),
    ("numbers", "1234567890 3.14159 -42 1e-9 0x1F 2026-12-01"),
    ("punctuation", "Wait... what?! (Yes); [no] {maybe} <ok> \"quoted\" 'single' -- em—dash"),
    ("url_email", "See https://example.com/path?q=1&r=2#frag or mail me@example.org."),
    ("cjk", "日本語のテキストと中文文本，还有한국어 텍스트。"),
    ("emoji", "I ❤️ emoji 😀👍🏽 and 👩‍👩‍👧 families 🇫🇷"),
    ("combining", "e\u0301 a\u0308 n\u0303 \u1e9b\u0323 Z\u0351\u0354\u0355"),
    ("scripts", "Привет мир. Γειά σου. مرحبا بالعالم. नमस्ते दुनिया. שלום"),
    ("math", "∀x∈ℝ: x² ≥ 0, ∑ᵢ aᵢ ≈ ∫ f(t) dt ≠ ∞"),
    ("byte_fallback_rare", "\U00020000\U0002a6df \ue000\uf8ff \U0010fffd \u0378"),
    ("byte_fallback_controls", "\x00\x01\x02\x07\x1b[0m\x7f"),
    ("zero_width", "a\u200bb\u200cc\u200dd\ufeffe\u00adf"),
    ("literal_byte_token_text", "<0x41> <0xFF> <0x0A>"),
    ("control_tokens", "<start_of_turn>user\nHi there!<end_of_turn>\n<start_of_turn>model\n"),
    ("control_glued", "x<bos>y<eos>z<pad><unk><mask>"),
    ("unused_tokens", "<unused0><unused99> <unused6241>"),
    ("control_partial", "<start_of_turn <end_of_turn> <start_of_turn>> <<bos>>"),
    ("user_defined_html", "<table><tr><td>cell</td></tr></table> <h1>Title</h1>"),
    ("user_defined_multimodal", "[multimodal] image here"),
    ("mixed_specials_spaces", "<start_of_turn>  two spaces\n\n<end_of_turn>   "),
    ("long_paragraph", (
        "Gemma is a family of lightweight, state-of-the-art open models built from the same research "
        "and technology used to create the Gemini models. They are text-to-text, decoder-only large "
        "language models, available in English, with open weights, pre-trained variants, and "
        "instruction-tuned variants. Gemma models are well-suited for a variety of text generation "
        "tasks, including question answering, summarization, and reasoning."
    )),
    ("prompt_capital", "The capital of France is"),
    ("apostrophes", "don't won't it's we'll they'd I'M YOU'RE"),
    ("repeated_chars", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!!!!!!!!!!!!??????"),
]


# Seeded random texts on top of CASES: characters of every kind the cases cover, and special-token
# texts, in random runs (the same pools as tests/tokenizer_gemma3.rs's own round-trip test).
POOLS = [
    "aZ0.,'</_xyz",
    "   \n\t\r",
    "éßжعन日本한\u0301\u200d",
    "😀👍\U0001f3fd\U00020000\ue000\U0010fffd\x00\x7f\ufeff",
]
WORDS = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<table>", "[multimodal]", "<0x41>", "the", " of", "  ", "\n\n"]


def random_cases(n, seed=10):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        parts = []
        for _ in range(rng.randrange(1, 40)):
            if rng.randrange(8) == 0:
                parts.append(rng.choice(WORDS))
            else:
                parts.append(rng.choice(rng.choice(POOLS)))
        out.append((f"random_{i}", "".join(parts)))
    return out


def load_metadata(path):
    reader = gguf.GGUFReader(path)
    wanted = ("tokenizer.", "general.architecture")
    return {k: f.contents() for k, f in reader.fields.items() if k.startswith(wanted)}


def hf_tokenizer(meta):
    keys = GGUF_TOKENIZER_MAPPING["tokenizer"]
    tokenizer_dict = {name: meta[f"tokenizer.{key}"] for key, name in keys.items() if f"tokenizer.{key}" in meta}
    backend, _ = convert_gguf_tokenizer(meta["general.architecture"], tokenizer_dict)
    return backend


def sentencepiece_processor(meta):
    tokens, scores, types = (meta[f"tokenizer.ggml.{k}"] for k in ("tokens", "scores", "token_type"))
    unk = meta["tokenizer.ggml.unknown_token_id"]
    model = pb.ModelProto()
    for i, (token, score, ty) in enumerate(zip(tokens, scores, types)):
        piece = model.pieces.add()
        # llama.cpp's converter writes SentencePiece's user-defined runs of `▁` as real spaces.
        piece.piece = "\u2581" * len(token) if ty == 4 and token and not token.strip(" ") else token
        piece.score = score
        # sentencepiece requires its unknown piece to be typed UNKNOWN (the GGUF says CONTROL).
        piece.type = 2 if i == unk else ty
    model.trainer_spec.model_type = pb.TrainerSpec.BPE
    model.trainer_spec.vocab_size = len(tokens)
    model.trainer_spec.byte_fallback = True
    model.trainer_spec.unk_id = unk
    model.trainer_spec.bos_id = meta["tokenizer.ggml.bos_token_id"]
    model.trainer_spec.eos_id = meta["tokenizer.ggml.eos_token_id"]
    model.trainer_spec.pad_id = meta["tokenizer.ggml.padding_token_id"]
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = bool(meta["tokenizer.ggml.add_space_prefix"])
    model.normalizer_spec.remove_extra_whitespaces = False
    model.normalizer_spec.escape_whitespaces = True
    return spm.SentencePieceProcessor(model_proto=model.SerializeToString())


def main():
    path = sys.argv[1]
    meta = load_metadata(path)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    hf = hf_tokenizer(meta)
    sp = sentencepiece_processor(meta)
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    control = sorted((t for t, ty in zip(tokens, types) if ty == 3 and t), key=lambda t: (-len(t), t))
    control_re = re.compile("(" + "|".join(re.escape(t) for t in control) + ")")
    control_ids = {t: i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 3}

    def sp_encode(text, parse_special):
        if not parse_special:
            return sp.encode(text)
        out = []
        for part in control_re.split(text):
            if part in control_ids:
                out.append(control_ids[part])
            elif part:
                out.extend(sp.encode(part))
        return out

    def hf_encode(text, parse_special):
        hf.encode_special_tokens = not parse_special
        return hf.encode(text, add_special_tokens=False).ids

    cases = []
    for name, text in CASES + random_cases(300):
        case = {"name": name, "text": text, "text_hex": text.encode("utf-8").hex()}
        for parse_special, suffix in ((True, "parse_special"), (False, "no_parse_special")):
            hf_ids, sp_ids = hf_encode(text, parse_special), sp_encode(text, parse_special)
            case[f"ids_{suffix}"] = hf_ids
            case[f"decoded_{suffix}_hex"] = hf.decode(hf_ids, skip_special_tokens=False).encode("utf-8").hex()
            if sp_ids != hf_ids:
                case[f"sentencepiece_ids_{suffix}"] = sp_ids
                sp_text = sp.decode(sp_ids) if not parse_special else None
                if sp_text is not None:
                    case[f"sentencepiece_decoded_{suffix}_hex"] = sp_text.encode("utf-8").hex()
        cases.append(case)

    # Decoding arbitrary id sequences (not produced by encoding): every token kind but BYTE, whose
    # lone bytes need not be UTF-8, plus byte runs that spell whole characters.
    rng = random.Random(20261201)
    non_byte = [i for i, ty in enumerate(types) if ty != 6]
    byte_id = {int(t[3:5], 16): i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 6}
    decode_cases = []
    for n in (1, 2, 5, 17, 64):
        for _ in range(4):
            decode_cases.append([rng.choice(non_byte) for _ in range(n)])
    for char in ("é", "€", "😀", "\U00020000"):
        decode_cases.append([byte_id[b] for b in char.encode("utf-8")])
    decode = [{"ids": ids, "text_hex": hf.decode(ids, skip_special_tokens=False).encode("utf-8").hex()}
              for ids in decode_cases]

    # The same vocabulary made Llama-2-like: add_space_prefix on, and the user-defined runs of
    # spaces typed UNUSED (Llama 2 has none; llama.cpp matches them in the text before the leading
    # space is added and SentencePiece after, so with both a prefix and those tokens the two part on
    # texts that start with a space). llama.cpp writes a leading `▁` at the start and after every
    # special token: that is SentencePiece with its dummy prefix run on each fragment between the
    # special tokens (user-defined ones always, control ones with parse_special).
    prefix_types = [5 if ty == 4 and t and not t.strip(" ") else ty for t, ty in zip(tokens, types)]
    prefix_meta = dict(meta)
    prefix_meta["tokenizer.ggml.add_space_prefix"] = True
    prefix_meta["tokenizer.ggml.token_type"] = prefix_types
    sp_prefix = sentencepiece_processor(prefix_meta)
    user_defined = sorted((t for t, ty in zip(tokens, prefix_types) if ty == 4 and t), key=lambda t: (-len(t), t))
    special_ids = {t: i for i, (t, ty) in enumerate(zip(tokens, prefix_types)) if ty in (3, 4)}

    def split_re(texts):
        return re.compile("(" + "|".join(re.escape(t) for t in texts) + ")")

    splitters = {True: split_re(sorted(control + user_defined, key=lambda t: (-len(t), t))), False: split_re(user_defined)}

    def sp_prefix_encode(text, parse_special):
        out = []
        for part in splitters[parse_special].split(text):
            if part in special_ids and (parse_special or prefix_types[special_ids[part]] == 4):
                out.append(special_ids[part])
            elif part:
                out.extend(sp_prefix.encode(part))
        return out

    space_prefix = [
        {"name": name, "text": text, **{f"ids_{suffix}": sp_prefix_encode(text, ps)
                                        for ps, suffix in ((True, "parse_special"), (False, "no_parse_special"))}}
        for name, text in CASES + [(f"prefix_{n}", t) for n, t in random_cases(100, seed=11)]
    ]

    out = {
        "model": {"file": Path(path).name, "sha256": digest},
        "made_with": {pkg: version(pkg) for pkg in ("transformers", "tokenizers", "sentencepiece", "gguf")},
        "vocab": {
            "size": len(tokens),
            "bos": meta["tokenizer.ggml.bos_token_id"],
            "eos": meta["tokenizer.ggml.eos_token_id"],
            "unk": meta["tokenizer.ggml.unknown_token_id"],
            "pad": meta["tokenizer.ggml.padding_token_id"],
            "add_bos_token": bool(meta["tokenizer.ggml.add_bos_token"]),
            "add_eos_token": bool(meta["tokenizer.ggml.add_eos_token"]),
            "add_space_prefix": bool(meta["tokenizer.ggml.add_space_prefix"]),
            "counts_by_type": {str(ty): sum(1 for t in types if t == ty) for ty in sorted(set(types))},
        },
        "cases": cases,
        "decode": decode,
        "space_prefix_cases": space_prefix,
    }
    target = Path(__file__).with_name("tokenize.json")
    # One case per line: small, and diffs read case by case.
    def dump(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    lines = [f' "{key}": {dump(out[key])},' for key in ("model", "made_with", "vocab")]
    for key in ("cases", "decode", "space_prefix_cases"):
        items = ",\n  ".join(dump(item) for item in out[key])
        lines.append(f' "{key}": [\n  {items}\n ],')
    lines[-1] = lines[-1].rstrip(",")
    target.write_text("{\n" + "\n".join(lines) + "\n}\n")
    json.loads(target.read_text())
    differ = [c["name"] for c in cases if any(k.startswith("sentencepiece_ids") for k in c)]
    assert all(name.startswith("spaces_") for name in differ), differ
    print(f"{target}: {len(cases)} cases, {len(decode)} decode cases, {len(space_prefix)} with add_space_prefix; "
          f"HF and SentencePiece differ on {differ}")


if __name__ == "__main__":
    main()
