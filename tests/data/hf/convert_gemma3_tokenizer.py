#!/usr/bin/env python3
"""Converts the cached Gemma 3 270M GGUF's tokenizer with transformers
(`AutoTokenizer.from_pretrained(..., gguf_file=...)`) and saves it as tokenizer.json (33 MB, not
committed) with Hugging Face `tokenizers`' ids on tests/data/gemma3/tokenize.json's texts, for
tests/hf_smollm2.rs's Gemma check (skipped loudly without it).

  /work/venv-ref/bin/python tests/data/hf/convert_gemma3_tokenizer.py [OUT]   # /tmp/ultra-gemma3-tok
"""

import json
import os
import sys
from pathlib import Path

from transformers import AutoTokenizer

cache = Path(os.environ.get("ULTRA_CACHE", Path.home() / ".cache/ultra"))
out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/ultra-gemma3-tok")
tok = AutoTokenizer.from_pretrained(str(cache), gguf_file="gemma-3-270m-q4_k_m.gguf")
tok.save_pretrained(out)
cases = json.loads((Path(__file__).parent.parent / "gemma3" / "tokenize.json").read_text())["cases"]
texts = [bytes.fromhex(c["text_hex"]).decode("utf-8", "replace") for c in cases]
ref = [{"text": t, "ids": tok.encode(t, add_special_tokens=False)} for t in texts]
(out / "ids.json").write_text(json.dumps(ref, ensure_ascii=False))
print(out, len(ref), "texts")
