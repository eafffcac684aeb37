#!/usr/bin/env python3
"""Makes the Hugging Face checkpoint directories in this folder with transformers' save_pretrained,
and transformers' own outputs on them (reference.json):

- `llama-smollm2/`: LlamaForCausalLM at a small shape (hidden 32, 2 layers, 4 heads / 2 KV heads
  of head_dim 8, tied embeddings), BF16, with SmolLM2's real tokenizer as transformers converts
  it from the cached SmolLM2 GGUF (`AutoTokenizer.from_pretrained(dir, gguf_file=...)`), its
  chat template and generation_config.json;
- `llama-sharded/`: LlamaForCausalLM (make_tiny.py's llama3 shape: hidden 64, head_dim 16, Llama 3
  rope scaling, untied output), F16, written in shards (max_shard_size) with its index;
- `qwen2-tiny/`, `qwen3-tiny/`, `gemma3-tiny/`: Qwen2 (q/k/v biases), Qwen3 (make_tiny.py's shape:
  head_dim 32, q/k norms, tied), Gemma 3 text (6 layers so one is global, sliding window 8,
  query_pre_attn_scalar = head_dim), F32. The first four small directories carry a byte-level BPE
  tokenizer.json (make_tiny.py's 256 bytes + 16 merges + 3 specials); gemma3-tiny a
  SentencePiece-style one (byte fallback, `▁` for spaces, merges learned here), as Gemma's.

Weights are drawn here (seeded) as in make_tiny.py (matrices N(0, 1/fan_in), embeddings
N(0, 0.3²), norm gains 1 ± 0.2, biases N(0, 0.1²); Gemma stores its gain as w with 1 + w applied,
so w is drawn as ± 0.2), rounded once to the file's dtype, and the reference runs in float64 on
exactly those values, eager attention, full sequences without a cache.

Run from the repository root: /work/venv-ref/bin/python tests/data/hf/make_hf.py
(needs $ULTRA_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf for the tokenizer).
"""

import copy
import json
import math
import os
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import (AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig, GenerationConfig, LlamaConfig,
                          LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

sys.path.insert(0, str(Path(__file__).parent.parent / "tiny"))
from make_tiny import LLAMA3_SCALING, N_MERGES, TRAIN_TEXT, bytes_to_unicode, vocabulary  # noqa: E402

HERE = Path(__file__).parent
SEED = 12
TOP_K = 10
NEW_TOKENS = 16
SEQ_LENS = (7, 24)
TEXTS = ["Hello, world!", "the cat sat on the mat.", "  two  spaces\tand a tab\nnew line",
         "Digits 12345 and 3.14159", "naïve café — “quotes” 日本語 🙂", "<|im_start|>user\nhi<|im_end|>",
         "I'm sure they'll've done it", ""]
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."},
            {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Again?"}]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def randomize(model, gen, dtype, gemma=False):
    with torch.no_grad():
        for name, p in model.named_parameters():
            u = 2 * torch.rand(p.shape, generator=gen, dtype=torch.float64) - 1
            if name.endswith("norm.weight"):
                p.copy_(0.2 * u if gemma else 1.0 + 0.2 * u)
            elif "embed_tokens" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(p.shape[1]))
        # Round the parameters only: `model.to(bf16)` would also round RoPE's inv_freq buffer,
        # which a model loaded from the file recomputes in float32.
        for p in model.parameters():
            p.copy_(p.to(dtype).to(torch.float64))


def byte_bpe_tokenizer(specials, template):
    """make_tiny.py's vocabulary as a transformers fast tokenizer (GPT-2 byte level)."""
    tokens, _, merges = vocabulary([])
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[tuple(m.split(" ")) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token=specials[0],
                                   chat_template=template)


def spm_tokenizer():
    """A Gemma-style tokenizer.json: BPE with byte fallback over `▁`-spaced text, no pre-tokenizer."""
    text = TRAIN_TEXT.replace(" ", "▁")
    pieces = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)]
    chars = sorted(set(text))
    pieces += chars
    words = [list(w) for w in ("▁" + text).split("▁▁")] if False else [list(text)]
    merges = []
    for _ in range(24):
        from collections import Counter
        pairs = Counter((a, b) for w in words for a, b in zip(w, w[1:]))
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        pieces.append(a + b)
        for w in words:
            i = 0
            while i + 1 < len(w):
                if (w[i], w[i + 1]) == (a, b):
                    w[i:i + 2] = [a + b]
                i += 1
    vocab = {p: i for i, p in enumerate(pieces)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens(["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"])
    template = ("{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\n' + "
                "message['content'] + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}"
                "{{ '<start_of_turn>model\n' }}{% endif %}")
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                   unk_token="<unk>", chat_template=template, add_bos_token=True)


def smollm2_tokenizer():
    cache = Path(os.environ.get("ULTRA_CACHE", Path.home() / ".cache/ultra"))
    return AutoTokenizer.from_pretrained(str(cache), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")


@torch.no_grad()
def logits_of(model, ids):
    return model(torch.tensor([ids]), use_cache=False).logits[0]


def top_k(logits):
    lp = torch.log_softmax(logits, dim=-1)
    v, i = lp.topk(TOP_K)
    return [[int(x) for x in row] for row in i], [[float(f"{x:.9g}") for x in row] for row in v]


def greedy(model, prompt):
    ids, tokens, gaps = list(prompt), [], []
    for _ in range(NEW_TOKENS):
        v, i = logits_of(model, ids)[-1].topk(2)
        tokens.append(int(i[0]))
        gaps.append(float(v[0] - v[1]))
        ids.append(tokens[-1])
    return tokens, gaps


def make(name, model, dtype, tokenizer, eos_ids, shard=None, gemma=False, n_text=None):
    gen = torch.Generator().manual_seed(SEED)
    randomize(model, gen, dtype, gemma)
    model.eval()
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    model.generation_config = GenerationConfig(bos_token_id=model.config.bos_token_id, eos_token_id=eos_ids)
    copy.deepcopy(model).to(dtype).save_pretrained(out, **({"max_shard_size": shard} if shard else {}))
    tokenizer.save_pretrained(out)
    # save_pretrained indents tokenizer.json (3.5 MB for SmolLM2's); the same JSON, compact.
    tj = out / "tokenizer.json"
    tj.write_text(json.dumps(json.loads(tj.read_text()), ensure_ascii=False, separators=(",", ":")))
    n_text = n_text or model.config.vocab_size
    g = torch.Generator().manual_seed(SEED)
    first = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None and gemma else []
    seqs = [first + torch.randint(0, n_text, (n - len(first),), generator=g).tolist() for n in SEQ_LENS]
    refs = []
    for s in seqs:
        ids, lps = top_k(logits_of(model, s))
        refs.append({"ids": s, "top_ids": ids, "top_logprobs": lps})
    prompt = seqs[1][:10]
    gen_tokens, gaps = greedy(model, prompt)
    f32 = copy.deepcopy(model).to(torch.float32)
    f32_diff = max((torch.log_softmax(logits_of(f32, s).double(), -1) - torch.log_softmax(logits_of(model, s), -1)).abs().max().item()
                   for s in seqs)
    tok_cases = [{"text": t, "ids": tokenizer.encode(t, add_special_tokens=False),
                  "ids_with_specials": tokenizer.encode(t)} for t in TEXTS]
    chat = (tokenizer.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
            if tokenizer.chat_template else None)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{name}: {size} bytes; float32 vs float64 max |Δ log-prob| {f32_diff:.2e}; smallest greedy gap {min(gaps):.4f}")
    return {"dir": name, "dtype": str(dtype).removeprefix("torch."), "float32_vs_float64_max_abs_logprob": f32_diff,
            "sequences": refs, "greedy": {"prompt_ids": prompt, "tokens": gen_tokens, "top2_gap": gaps},
            "tokenizer": tok_cases, "messages": MESSAGES, "chat": chat, "eos_ids": eos_ids}


def main():
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    entries = {}
    small = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, rms_norm_eps=1e-6, attn_implementation="eager")
    n_vocab = 256 + N_MERGES + 3

    smol = smollm2_tokenizer()
    eos = [smol.eos_token_id, smol.convert_tokens_to_ids("<|endoftext|>")]
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=8, vocab_size=len(smol), max_position_embeddings=2048,
                      rope_theta=1e5, rms_norm_eps=1e-5, tie_word_embeddings=True, attn_implementation="eager",
                      bos_token_id=smol.bos_token_id, eos_token_id=smol.eos_token_id)
    entries["llama-smollm2"] = make("llama-smollm2", LlamaForCausalLM(cfg).double(), torch.bfloat16, smol, eos)

    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    cfg = LlamaConfig(**small, head_dim=16, vocab_size=n_vocab, max_position_embeddings=2048, rope_theta=1e4,
                      rope_scaling=LLAMA3_SCALING, tie_word_embeddings=False, bos_token_id=256 + N_MERGES,
                      eos_token_id=256 + N_MERGES + 1)
    entries["llama-sharded"] = make("llama-sharded", LlamaForCausalLM(cfg).double(), torch.float16,
                                    byte_bpe_tokenizer(specials, None), [257 + N_MERGES, 258 + N_MERGES],
                                    shard="60KB", n_text=256 + N_MERGES)

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    cfg = Qwen2Config(**small, vocab_size=n_vocab, max_position_embeddings=1024, rope_theta=1e6,
                      tie_word_embeddings=False, bos_token_id=None, eos_token_id=256 + N_MERGES)
    entries["qwen2-tiny"] = make("qwen2-tiny", Qwen2ForCausalLM(cfg).double(), torch.float32,
                                 byte_bpe_tokenizer(specials, CHATML), [258 + N_MERGES, 256 + N_MERGES],
                                 n_text=256 + N_MERGES)
    cfg = Qwen3Config(**small, head_dim=32, vocab_size=n_vocab, max_position_embeddings=1024, rope_theta=1e6,
                      tie_word_embeddings=True, bos_token_id=None, eos_token_id=256 + N_MERGES)
    entries["qwen3-tiny"] = make("qwen3-tiny", Qwen3ForCausalLM(cfg).double(), torch.bfloat16,
                                 byte_bpe_tokenizer(specials, CHATML), [258 + N_MERGES, 256 + N_MERGES],
                                 n_text=256 + N_MERGES)

    spm = spm_tokenizer()
    cfg = Gemma3TextConfig(**{**small, "num_hidden_layers": 6}, head_dim=16, vocab_size=len(spm), sliding_window=8,
                           query_pre_attn_scalar=16, max_position_embeddings=1024, rope_theta=1e6,
                           rope_local_base_freq=1e4, final_logit_softcapping=None, attn_logit_softcapping=None,
                           tie_word_embeddings=True, bos_token_id=2, eos_token_id=1, pad_token_id=0)
    entries["gemma3-tiny"] = make("gemma3-tiny", Gemma3ForCausalLM(cfg).double(), torch.float32, spm,
                                  [1, spm.convert_tokens_to_ids("<end_of_turn>")], gemma=True)

    out = {"made_with": {p: version(p) for p in ("transformers", "torch", "tokenizers", "safetensors")},
           "dtype": "float64", "attn_implementation": "eager", "top_k": TOP_K, "models": entries}
    (HERE / "reference.json").write_text(json.dumps(out, separators=(",", ":"), ensure_ascii=False) + "\n")
    print("reference.json", (HERE / "reference.json").stat().st_size, "bytes")


if __name__ == "__main__":
    main()
