#!/usr/bin/env python3
"""Makes tests/data/gemma3/reference.json: Hugging Face transformers' float32 outputs for Gemma 3
270M (the Q4_K_M GGUF, dequantized exactly), against which tests/gemma3_reference.rs checks the
engine on the CPU.

transformers loads the GGUF itself (`from_pretrained(dir, gguf_file=...)`, which dequantizes each
tensor with the `gguf` package and subtracts the 1 that llama.cpp's converter adds to Gemma's norm
gains; Gemma3RMSNorm adds it back). Before anything is computed this script checks, tensor by
tensor, that the model's weights are the `gguf` package's dequantization of the file (norms: 1 + w)
and that the derived config has the settings the engine hard-codes (src/model/config.rs).

What it writes (token ids with BOS first, as the engine's `encode_with_specials` gives them):
- `teacher_forced`: for each text, the top-10 log-probs (log-softmax in float64 of the float32
  logits) at every position;
- `greedy`: for each prompt, 32 greedy tokens (argmax of a full float32 forward pass over prompt +
  tokens so far, EOS not special) with the top-1 minus top-2 logit gap at each step;
- `dequantized_sha256`: per tensor, the sha256 of its `gguf.dequantize` values as little-endian
  f32 in the file's row order (what transformers runs on; the engine must dequantize to the same bits);
- `perplexity`: llama.cpp's `llama-perplexity` figure on `texts.long` at ctx 128: chunks of 128
  tokens, each chunk's first token replaced by BOS, the logits at positions 64..126 of each chunk
  scoring the next token.

With `--f64`, the teacher-forced texts are run once more in float64 and the differences printed
(README.md quotes them); nothing of that run is stored.

Run from the repository root (see README.md for the versions):
    /work/venv-ref/bin/python tests/data/gemma3/make_reference.py "$ULTRA_CACHE/gemma-3-270m-q4_k_m.gguf" [--f64]
"""

import hashlib
import json
import sys
from importlib.metadata import version
from pathlib import Path

import gguf
import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

TOP = 10
NEW_TOKENS = 32
PPL_CTX = 128

TEXTS = {
    "prose": (
        "The lighthouse keeper climbed the narrow stairs every evening at dusk. He trimmed the wick, "
        "polished the great lens until it shone, and wrote the weather in a leather-bound log: wind "
        "from the west, a heavy swell, two ships sighted before dark."
    ),
    "code": (
        "def merge_sorted(a, b):\n"
        "    \"\"\"Merge two sorted lists into one sorted list.\"\"\"\n"
        "    out, i, j = [], 0, 0\n"
        "    while i < len(a) and j < len(b):\n"
        "        if a[i] <= b[j]:\n"
        "            out.append(a[i])\n"
        "            i += 1\n"
        "        else:\n"
        "            out.append(b[j])\n"
        "            j += 1\n"
        "    return out + a[i:] + b[j:]\n"
    ),
    "facts": (
        "Water boils at 100 degrees Celsius at sea level. The speed of light is about 299,792 "
        "kilometres per second. Paris is the capital of France, Berlin of Germany, and Madrid of "
        "Spain. In 1969, Apollo 11 landed on the Moon."
    ),
}

# Past the sliding window (512 keys): its last positions see only part of the text in the local
# layers. Also the perplexity text (5 chunks of 128).
LONG = " ".join([
    "The river begins as a thin stream high in the mountains, where snow melts slowly through the spring.",
    "Shepherds who lived along its upper valley used to say that you could hear it long before you saw it,",
    "a steady murmur under the wind, and that its voice changed with the seasons: sharp and quick in April,",
    "slow and heavy in the late summer, almost silent under the winter ice. Lower down, the valley widens.",
    "Farmers dug channels from the river to water their fields of barley and beans, and each village kept a",
    "careful record of who could open the gates, and on which days, and for how many hours. Disputes over",
    "water were settled by an elected council that met in the square beneath an old walnut tree. Its rulings",
    "were written on wooden boards and hung on the wall of the mill, so that anyone could read them.",
    "When the railway came, the valley changed quickly. A bridge of iron and stone was built across the",
    "gorge, and trains carried timber, wool and cheese to the cities on the plain. Young people left to work",
    "in factories, and some of the high farms were abandoned; their terraces slowly returned to forest.",
    "Yet the council under the walnut tree still met every month, and the boards on the mill wall grew in",
    "number until they covered it entirely. Historians now study them as one of the longest continuous",
    "records of local government in the region. They show droughts and floods, quarrels between families,",
    "new crops and old customs, and, year after year, the patient work of sharing a river fairly.",
    "Today the mill is a small museum. Visitors can walk along the channels, which still carry water to a few",
    "gardens, and read the boards, some of them more than three hundred years old. The oldest are hard to",
    "decipher: the ink has faded, and the spelling is strange. But the rules they record are simple. Take",
    "only your share. Close the gate when your hours are done. Repair the channel where it passes your land.",
    "Report a leak to the council. Do not let the water run to waste. Guides like to end the tour at the",
    "walnut tree, which is older than any of the boards, and to point out that the council still has no",
    "building of its own. It meets in the open air, as it always has, and in bad weather it simply waits.",
    "Near the museum there is a bakery that sells a flat bread made with barley flour, walnuts and honey,",
    "from a recipe said to be as old as the council itself. The bakers rise at four in the morning to light",
    "the oven with dry vine cuttings, and by seven there is usually a line of villagers and walkers at the",
    "door. Children from the school come at noon for the broken pieces, which are given away for free.",
])


def load_gguf(path):
    reader = gguf.GGUFReader(path)
    tensors = {t.name: gguf.dequantize(t.data, t.tensor_type).astype(np.float32) for t in reader.tensors}
    return reader, tensors


def hf_name(name):
    """The transformers parameter that holds GGUF tensor `name` (Gemma3ForCausalLM)."""
    fixed = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
    if name in fixed:
        return fixed[name]
    _, layer, part, _ = name.split(".")
    part = {
        "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
        "attn_norm": "input_layernorm", "post_attention_norm": "post_attention_layernorm",
        "ffn_norm": "pre_feedforward_layernorm", "post_ffw_norm": "post_feedforward_layernorm",
        "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    }[part]
    return f"model.layers.{layer}.{part}.weight"


def check_weights(model, tensors):
    """Every parameter is the gguf package's dequantization; norm gains as 1 + w. Returns the
    largest |(1 + w) - gguf| over the norms (float32 rounding of the converter's shift)."""
    params = dict(model.named_parameters())
    assert "lm_head.weight" not in params or params["lm_head.weight"] is params["model.embed_tokens.weight"]
    seen, norm_worst = set(), 0.0
    for name, want in tensors.items():
        key = hf_name(name)
        got = params[key].detach()
        want = torch.from_numpy(want).reshape(got.shape)
        if name.endswith("norm.weight"):
            norm_worst = max(norm_worst, (1.0 + got - want).abs().max().item())
        else:
            assert torch.equal(got, want), f"{name}: transformers' weights differ from gguf.dequantize"
        seen.add(key)
    assert seen == set(params) - {"lm_head.weight"}, set(params) ^ seen
    assert norm_worst < 1e-5, norm_worst
    return norm_worst


def check_config(c):
    """The settings the engine hard-codes or reads (src/model/config.rs), as transformers derives them."""
    layer_types = ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(c.num_hidden_layers)]
    want = {
        "head_dim": 256, "query_pre_attn_scalar": 256, "sliding_window": 512, "layer_types": layer_types,
        "final_logit_softcapping": None, "attn_logit_softcapping": None, "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": True, "use_bidirectional_attention": False,
        "rope_parameters": {"full_attention": {"rope_theta": 1e6, "rope_type": "default"},
                            "sliding_attention": {"rope_theta": 1e4, "rope_type": "default"}},
    }
    for key, value in want.items():
        assert getattr(c, key) == value, (key, getattr(c, key), value)
    assert abs(c.rms_norm_eps - 1e-6) < 1e-12
    return {k: getattr(c, k) for k in ("num_hidden_layers", "hidden_size", "intermediate_size",
                                       "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
                                       "max_position_embeddings", *want)}


@torch.no_grad()
def logits_of(model, ids, last_only=False):
    out = model(torch.tensor([ids]), use_cache=False, logits_to_keep=1 if last_only else 0).logits[0]
    return out.double()  # [n, vocab], or [1, vocab] with last_only


def top_logprobs(logits):
    lp = torch.log_softmax(logits, dim=-1)
    values, idx = lp.topk(TOP, dim=-1)
    return idx.tolist(), values.tolist()


def top2(row):
    values, idx = row.topk(2)
    return int(idx[0]), float(values[0] - values[1])


def greedy(model, prompt):
    ids, tokens, gaps = list(prompt), [], []
    for _ in range(NEW_TOKENS):
        row = logits_of(model, ids, last_only=True)[-1]
        token, gap = top2(row)
        tokens.append(token)
        gaps.append(gap)
        ids.append(token)
    return tokens, gaps


def perplexity(model, ids, bos):
    n_chunks = len(ids) // PPL_CTX
    first = PPL_CTX // 2
    nlls = []
    for c in range(n_chunks):
        chunk = list(ids[c * PPL_CTX:(c + 1) * PPL_CTX])
        chunk[0] = bos
        lp = torch.log_softmax(logits_of(model, chunk), dim=-1)
        nlls += [-lp[pos, chunk[pos + 1]].item() for pos in range(first, PPL_CTX - 1)]
    return n_chunks, nlls


def run(model, tok, bos):
    encode = lambda text: [bos] + tok.encode(text, add_special_tokens=False)
    texts = {**TEXTS, "long": LONG}
    teacher = []
    for name, text in texts.items():
        ids = encode(text)
        top_ids, top_lps = top_logprobs(logits_of(model, ids))
        teacher.append({"name": name, "text": text, "ids": ids, "top_ids": top_ids, "top_logprobs": top_lps})
        print(f"teacher-forced {name}: {len(ids)} tokens", flush=True)
    prompts = {
        "capital": "The capital of France is",
        "story": "Once upon a time, in a small village by the sea,",
        "code": "def fibonacci(n):\n",
        "list": "Monday, Tuesday, Wednesday,",
    }
    greedy_out = []
    for name, text in prompts.items():
        ids = encode(text)
        tokens, gaps = greedy(model, ids)
        greedy_out.append({"name": name, "prompt": text, "prompt_ids": ids, "tokens": tokens, "top2_gap": gaps})
        print(f"greedy {name}: smallest gap {min(gaps):.3f}", flush=True)
    n_chunks, nlls = perplexity(model, encode(LONG), bos)
    ppl = {"text": "long", "ctx": PPL_CTX, "n_chunks": n_chunks, "tokens_scored": len(nlls),
           "ppl": float(np.exp(np.mean(nlls))), "nll": nlls}
    return teacher, greedy_out, ppl


def compare(model, teacher):
    """Per text, the largest |Δ log p| of another run (float64) on the stored top-10 ids."""
    out = {}
    for t in teacher:
        lp = torch.log_softmax(logits_of(model, t["ids"]), dim=-1)
        got = lp.gather(1, torch.tensor(t["top_ids"]))
        out[t["name"]] = f"{(got - torch.tensor(t['top_logprobs'], dtype=torch.float64)).abs().max().item():.2e}"
    return out


def main():
    path = Path(sys.argv[1])
    torch.set_num_threads(2)
    reader, tensors = load_gguf(path)
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    norm_worst = check_weights(model, tensors)
    config = check_config(model.config)
    bos = tok.bos_token_id
    assert bos == 2 and reader.fields["tokenizer.ggml.add_bos_token"].contents() is True
    print(f"weights equal gguf.dequantize (norm gains within {norm_worst:.2e}); config as the engine's")
    teacher, greedy_out, ppl = run(model, tok, bos)
    out = {
        "model": {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()},
        "made_with": {p: version(p) for p in ("transformers", "torch", "gguf", "numpy", "tokenizers")},
        "dtype": "float32", "attn_implementation": "eager",
        "config": config,
        "norm_gain_max_rounding": norm_worst,
        "dequantized_sha256": {name: hashlib.sha256(t.astype("<f4").tobytes()).hexdigest()
                               for name, t in tensors.items()},
        "teacher_forced": teacher, "greedy": greedy_out, "perplexity": ppl,
    }
    target = Path(__file__).with_name("reference.json")
    def dump(value):
        return json.dumps(value, separators=(",", ":"))
    # Log-probs to 7 significant digits (float32 logits carry about that much).
    def rounded(value):
        if isinstance(value, float):
            return float(f"{value:.7g}")
        if isinstance(value, list):
            return [rounded(v) for v in value]
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        return value
    out = rounded(out)
    lines = [f' "{k}": {dump(v)},' for k, v in out.items() if k not in ("teacher_forced", "greedy")]
    for key in ("teacher_forced", "greedy"):
        items = ",\n  ".join(dump(item) for item in out[key])
        lines.append(f' "{key}": [\n  {items}\n ],')
    lines[-1] = lines[-1].rstrip(",")
    target.write_text("{\n" + "\n".join(lines) + "\n}\n")
    json.loads(target.read_text())
    print(f"{target}: {len(teacher)} texts ({[len(t['ids']) for t in teacher]} tokens), "
          f"{len(greedy_out)} greedy prompts, PPL {ppl['ppl']:.4f} over {ppl['n_chunks']} chunks; "
          f"smallest greedy gaps {[round(min(g['top2_gap']), 3) for g in greedy_out]}")
    if "--f64" in sys.argv:
        print("float32 vs float64, max |Δ log p| on the top 10:", compare(model.double(), teacher))


if __name__ == "__main__":
    main()
