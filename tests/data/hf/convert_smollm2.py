#!/usr/bin/env python3
"""Converts the cached SmolLM2-135M-Instruct GGUF (Q4_1) into a Hugging Face directory with
transformers itself (`from_pretrained(..., gguf_file=...)` dequantizes every tensor to float32 and
undoes llama.cpp's q/k permutation), saved as F32 safetensors with its tokenizer. Not committed
(540 MB): tests/hf_smollm2.rs runs on it when it exists and skips loudly otherwise.

  /work/venv-ref/bin/python tests/data/hf/convert_smollm2.py [OUT]   # OUT: /tmp/ultra-smollm2-hf
"""

import os
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

cache = Path(os.environ.get("ULTRA_CACHE", Path.home() / ".cache/ultra"))
out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/ultra-smollm2-hf")
gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
model = AutoModelForCausalLM.from_pretrained(str(cache), gguf_file=gguf, dtype=torch.float32)
# A model loaded from GGUF refuses save_pretrained: the same weights in a plain model do not.
config = model.config
if hasattr(config, "quantization_config"):
    del config.quantization_config
plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
plain.load_state_dict(model.state_dict())
plain.save_pretrained(out)
AutoTokenizer.from_pretrained(str(cache), gguf_file=gguf).save_pretrained(out)
print(out, sum(f.stat().st_size for f in out.iterdir()), "bytes")
