#!/usr/bin/env python3
"""Makes the tiny random-weight checkpoints in this folder and transformers' logits on them:

- `qwen3-tiny.gguf`: Qwen3ForCausalLM (q/k norms, head_dim 32 ≠ hidden / heads = 16, GQA 4:2,
  tied embeddings);
- `llama3-tiny.gguf`: LlamaForCausalLM with Llama 3 rope scaling (`rope_type = llama3`, chosen so
  that the 8 frequency pairs fall in all three of its regimes: unscaled, smoothed and divided by
  the factor), GQA 4:2, an untied output;
- `reference.json`: each model's float64 logits at every position of three token sequences, and
  32 greedy tokens after a prompt with the top-2 logit gap at each step.

The weights are drawn here (seeded), scaled so that logits are of order 1 (transformers' own
initialization, std 0.02, would give near-uniform distributions and ties everywhere), stored as
F32, and converted to GGUF with the `gguf` package as llama.cpp's convert_hf_to_gguf.py does it:
its tensor names and metadata keys; for llama, the q/k rows permuted from Hugging Face's
rotate-half order to GGML's adjacent pairs (`LlamaModel.permute`), and Llama 3's scaling written
as the `rope_freqs.weight` tensor of per-pair frequency divisors (`generate_extra_tensors`: 1
below the high-frequency wavelength, `factor` above the low one, 1 / ((1 - s) / factor + s) in
between), with no `rope.scaling.*` keys. The vocabulary is byte-level BPE: the 256 byte tokens
(GPT-2's byte-to-unicode strings), 16 merges learned here on a short text, and 3 control tokens.

The reference runs in float64 (the F32 weights are exact in it), with eager attention. The script
also checks that transformers' llama3 inverse frequencies equal the base ones divided by
`rope_freqs` and that reading the GGUF back gives the weights, and prints how far float32 and a
model without the rope scaling land from the float64 logits (README.md quotes it).

Run from the repository root: /work/venv-ref/bin/python tests/data/tiny/make_tiny.py
"""

import json
import math
from collections import Counter
from importlib.metadata import version
from pathlib import Path

import gguf
import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

HERE = Path(__file__).parent
SEED = 10
N_MERGES = 16
NEW_TOKENS = 32
SEQ_LENS = (8, 24, 80)

# Llama 3 rope scaling on head_dim 16 with base 1e4: wavelengths 2π·1e4^(i/8) = 6.3, 20, 63, 199,
# 628, ... against 256 / 8 = 32 and 256 / 1: pairs 0-1 unscaled, 2-3 smoothed, 4-7 divided by 8.
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 8.0,
                  "original_max_position_embeddings": 256}

TRAIN_TEXT = "the cat sat on the mat. the dog ate the bone. then the cat and the dog slept in the sun."


def bytes_to_unicode():
    """GPT-2's byte → printable character map (what byte-level BPE vocabularies store)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def vocabulary(specials):
    """256 byte tokens, N_MERGES merges learned on TRAIN_TEXT (within space-led words), specials."""
    table = bytes_to_unicode()
    tokens = [table[b] for b in range(256)]
    words = [[table[b] for b in (" " + w if i else w).encode()] for i, w in enumerate(TRAIN_TEXT.split(" "))]
    merges = []
    for _ in range(N_MERGES):
        pairs = Counter((a, b) for w in words for a, b in zip(w, w[1:]))
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        for w in words:
            i = 0
            while i + 1 < len(w):
                if (w[i], w[i + 1]) == (a, b):
                    w[i:i + 2] = [a + b]
                i += 1
    types = [gguf.TokenType.NORMAL] * len(tokens) + [gguf.TokenType.CONTROL] * len(specials)
    return tokens + specials, types, merges


def randomize(model, gen):
    """Matrices of std 1/sqrt(fan_in), embeddings of std 0.3 (a tied output then gives logits of
    std about 0.3 · sqrt(64) = 2.4), norm gains 1 ± 0.2."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * (2 * torch.rand(p.shape, generator=gen, dtype=torch.float64) - 1))
            elif "embed_tokens" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(p.shape[1]))
    # Stored as F32: round once, so that the float64 reference runs on exactly the file's values.
    model.to(torch.float32).to(torch.float64)


def permute(w, n_head):
    """llama.cpp's HF → GGUF q/k row order (LlamaModel.permute): rotate-half pairs (i, i + hd/2) of
    each head become adjacent rows (2i, 2i + 1), as GGML's normal RoPE rotates them."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg):
    """convert_hf_to_gguf.py's Llama 3 `rope_freqs`: each pair's wavelength divisor."""
    s = cfg.rope_parameters
    dim = cfg.head_dim
    freqs = 1.0 / (s["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    out = []
    for f in freqs.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write_gguf(path, arch, model, tokens, types, merges, tok_ids, pre, add_bos, extra=()):
    c = model.config
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(path.stem)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(c.vocab_size)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_dimension_count(c.head_dim)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tok_ids["bos"])
    w.add_eos_token_id(tok_ids["eos"])
    w.add_add_bos_token(add_bos)
    sd = {k: v.to(torch.float32).numpy() for k, v in model.state_dict().items()}
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    written = {}
    def add(name, array):
        written[name] = np.ascontiguousarray(array, dtype=np.float32)
        w.add_tensor(name, written[name])
    add("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(c.num_hidden_layers):
        for hf, gg in names.items():
            key = f"model.layers.{i}.{hf}.weight"
            if key not in sd:
                continue
            t = sd[key]
            if arch == "llama" and gg == "attn_q":
                t = permute(t, c.num_attention_heads)
            if arch == "llama" and gg == "attn_k":
                t = permute(t, c.num_key_value_heads)
            add(f"blk.{i}.{gg}.weight", t)
    add("output_norm.weight", sd["model.norm.weight"])
    if not c.tie_word_embeddings:
        add("output.weight", sd["lm_head.weight"])
    for name, array in extra:
        add(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # Read back: every tensor as written, and all of the model's parameters present.
    r = gguf.GGUFReader(str(path))
    back = {t.name: np.array(t.data).reshape(written[t.name].shape) for t in r.tensors}
    assert back.keys() == written.keys() and all(np.array_equal(back[k], written[k]) for k in back)


@torch.no_grad()
def logits_of(model, ids):
    return model(torch.tensor([ids]), use_cache=False).logits[0]


def greedy(model, prompt):
    ids, tokens, gaps = list(prompt), [], []
    for _ in range(NEW_TOKENS):
        v, i = logits_of(model, ids)[-1].topk(2)
        tokens.append(int(i[0]))
        gaps.append(float(v[0] - v[1]))
        ids.append(tokens[-1])
    return tokens, gaps


def make(name, arch, model, specials, tok_ids, pre, add_bos, extra=()):
    gen = torch.Generator().manual_seed(SEED)
    randomize(model, gen)
    model.eval()
    tokens, types, merges = vocabulary(specials)
    assert len(tokens) == model.config.vocab_size
    write_gguf(HERE / f"{name}.gguf", arch, model, tokens, types, merges, tok_ids, pre, add_bos, extra)
    rng = np.random.default_rng(SEED)
    n_text = 256 + N_MERGES
    first = [tok_ids["bos"]] if add_bos else []
    seqs = [first + rng.integers(0, n_text, n - len(first)).tolist() for n in SEQ_LENS]
    logits = [logits_of(model, s) for s in seqs]
    prompt = seqs[1][:12]
    gen_tokens, gaps = greedy(model, prompt)
    f32 = model.to(torch.float32)
    f32_diff = max((logits_of(f32, s).double() - l).abs().max().item() for s, l in zip(seqs, logits))
    model.to(torch.float64)
    scale = max(l.abs().max().item() for l in logits)
    print(f"{name}: |logit| ≤ {scale:.2f}; float32 transformers vs float64: max |Δ| {f32_diff:.2e}; "
          f"smallest greedy gap {min(gaps):.4f}")
    entry = {
        "file": f"{name}.gguf",
        "config": {k: v for k, v in model.config.to_dict().items()
                   if k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                            "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps", "rope_parameters",
                            "tie_word_embeddings", "max_position_embeddings")},
        "float32_vs_float64_max_abs": f32_diff,
        "sequences": [{"ids": s, "logits": [[float(f"{x:.7g}") for x in row] for row in l.tolist()]}
                      for s, l in zip(seqs, logits)],
        "greedy": {"prompt_ids": prompt, "tokens": gen_tokens, "top2_gap": gaps},
    }
    return entry, seqs, logits


def main():
    torch.set_num_threads(2)
    torch.manual_seed(SEED)
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, rms_norm_eps=1e-6, attention_bias=False)
    qwen = Qwen3ForCausalLM(Qwen3Config(**common, head_dim=32, vocab_size=256 + N_MERGES + 3,
                                        max_position_embeddings=1024, rope_theta=1e6, tie_word_embeddings=True,
                                        attn_implementation="eager", dtype="float64",
                                        bos_token_id=None, eos_token_id=256 + N_MERGES)).double()
    qwen_entry, _, _ = make("qwen3-tiny", "qwen3", qwen, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                            {"bos": 256 + N_MERGES, "eos": 256 + N_MERGES}, "gpt-2", False)

    llama_cfg = LlamaConfig(**common, head_dim=16, vocab_size=256 + N_MERGES + 3, max_position_embeddings=2048,
                            rope_theta=1e4, rope_scaling=LLAMA3_SCALING, tie_word_embeddings=False,
                            attn_implementation="eager", bos_token_id=256 + N_MERGES,
                            eos_token_id=256 + N_MERGES + 1)
    llama = LlamaForCausalLM(llama_cfg).double()
    assert llama.config.rope_parameters["rope_type"] == "llama3", llama.config.rope_parameters
    factors = llama3_rope_factors(llama.config)
    # transformers' own llama3 frequencies are the base ones over these divisors.
    hd = llama.config.head_dim
    base = 1.0 / (1e4 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    inv = llama.model.rotary_emb.inv_freq.double()
    assert torch.allclose(inv, base / torch.from_numpy(factors).double(), rtol=1e-6), (inv, base / factors)
    print("llama3 rope_freqs:", [round(float(f), 4) for f in factors])
    llama_entry, seqs, logits = make("llama3-tiny", "llama", llama,
                                     ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
                                     {"bos": 256 + N_MERGES, "eos": 256 + N_MERGES + 1}, "llama-bpe", True,
                                     extra=[("rope_freqs.weight", factors)])
    # How much the scaling matters here: the same weights without it.
    plain = LlamaForCausalLM(LlamaConfig(**{**llama_cfg.to_dict(), "rope_scaling": None,
                                            "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}})).double()
    plain.load_state_dict(llama.state_dict())
    plain.eval()
    unscaled = max((logits_of(plain, s) - l).abs().max().item() for s, l in zip(seqs, logits))
    print(f"llama3-tiny without the rope scaling: max |Δ| {unscaled:.3f} from the scaled logits")
    llama_entry["unscaled_max_abs_diff"] = unscaled

    out = {"made_with": {p: version(p) for p in ("transformers", "torch", "gguf", "numpy")},
           "dtype": "float64", "attn_implementation": "eager",
           "models": {"qwen3": qwen_entry, "llama3": llama_entry}}
    (HERE / "reference.json").write_text(json.dumps(out, separators=(",", ":")) + "\n")
    for f in ("qwen3-tiny.gguf", "llama3-tiny.gguf", "reference.json"):
        print(f, (HERE / f).stat().st_size, "bytes")


if __name__ == "__main__":
    main()
