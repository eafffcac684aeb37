#!/usr/bin/env python3
"""Writes the seeds of the `safetensors` fuzz target (fuzz/corpus/safetensors/): for each tiny
config of fuzz/harness.rs `HF_CONFIGS` (first byte = its index), a model.safetensors holding that
model's tensors (random values, F32, F16 or BF16), plus a few broken ones (header length past the
file, overlapping offsets, a dtype/shape/length mismatch, bad JSON).

Run from the repository root: /work/venv-ref/bin/python tests/data/hf/make_fuzz_seeds.py
"""

import json
import struct
from pathlib import Path

import torch
from safetensors.torch import save

OUT = Path("fuzz/corpus/safetensors")
H, F, V, HD, NH, NKV = 8, 16, 16, 4, 2, 1


def tensors(arch, dtype):
    g = torch.Generator().manual_seed(arch)
    r = lambda *s: torch.randn(*s, generator=g).to(dtype)
    t = {"model.embed_tokens.weight": r(V, H), "model.norm.weight": r(H)}
    p = "model.layers.0."
    t |= {p + "self_attn.q_proj.weight": r(NH * HD, H), p + "self_attn.k_proj.weight": r(NKV * HD, H),
          p + "self_attn.v_proj.weight": r(NKV * HD, H), p + "self_attn.o_proj.weight": r(H, NH * HD),
          p + "mlp.gate_proj.weight": r(F, H), p + "mlp.up_proj.weight": r(F, H), p + "mlp.down_proj.weight": r(H, F),
          p + "input_layernorm.weight": r(H), p + "post_attention_layernorm.weight": r(H)}
    if arch in (0, 1):
        t["lm_head.weight"] = r(V, H)
    if arch == 1:
        t |= {p + "self_attn.q_proj.bias": r(NH * HD), p + "self_attn.k_proj.bias": r(NKV * HD),
              p + "self_attn.v_proj.bias": r(NKV * HD)}
    if arch in (2, 3):
        t |= {p + "self_attn.q_norm.weight": r(HD), p + "self_attn.k_norm.weight": r(HD)}
    if arch == 3:
        t |= {p + "pre_feedforward_layernorm.weight": r(H), p + "post_feedforward_layernorm.weight": r(H)}
    return t


def raw(header, data=b""):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for arch, name in enumerate(["llama", "qwen2", "qwen3", "gemma3"]):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            (OUT / f"seed-{name}-{str(dtype)[6:]}").write_bytes(bytes([arch]) + save(tensors(arch, dtype)))
    f32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    broken = {
        "header-past-end": struct.pack("<Q", 1 << 40) + b"{}",
        "overlap": raw({"a": f32, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)),
        "length-mismatch": raw({"a": {"dtype": "F16", "shape": [3], "data_offsets": [0, 8]}}, bytes(8)),
        "bad-json": struct.pack("<Q", 5) + b"{\"a\":",
        "offsets-past-end": raw({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)),
        "int-dtype": raw({"model.norm.weight": {"dtype": "I64", "shape": [8], "data_offsets": [0, 64]}}, bytes(64)),
    }
    for name, data in broken.items():
        (OUT / f"seed-{name}").write_bytes(bytes([0]) + data)
    print(len(list(OUT.iterdir())), "seeds")


if __name__ == "__main__":
    main()
