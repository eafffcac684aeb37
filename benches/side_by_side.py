#!/usr/bin/env python3
"""Issue-style side-by-side tables: `ultra bench` and llama.cpp's `llama-bench` (and
`llama-batched-bench`) on the same files, in one run, engines alternating model by model.

It runs binaries it is given; it does not fetch or build llama.cpp. Each cell is a median: ultra's
over `-r` runs, llama.cpp's over its `samples_ts` (llama-bench prints mean ± sd; both are kept in
the JSON). Decode: ultra's tg after the p-token prompt (a deeper context than llama-bench's tg,
which starts from an empty cache), unless --tg-depth says otherwise.

    python3 benches/side_by_side.py --backend cuda --ultra target/release/ultra \
        --llama-bench ~/llama.cpp/build/bin/llama-bench \
        --batched-bench ~/llama.cpp/build/bin/llama-batched-bench \
        --model smollm2=/tmp/s.gguf --model llama-1b=/tmp/l1.gguf --model llama-8b=/tmp/l8.gguf \
        --batched-model /tmp/l8.gguf --batch 32,64 --out side_by_side.json

    # wgpu against llama.cpp's Vulkan build, with and without its matrix cores:
    python3 benches/side_by_side.py --backend wgpu ... \
        --variant vulkan= --variant no-coopmat=GGML_VK_DISABLE_COOPMAT=1,GGML_VK_DISABLE_COOPMAT2=1
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

# llama.cpp's flags per ultra backend: all layers on the GPU; flash attention on CUDA, as issue #14 measures.
LLAMA_ARGS = {"cuda": "-ngl 99 -fa 1", "wgpu": "-ngl 99", "cpu": "-ngl 0"}


def run(cmd, env=None):
    """stdout of cmd; a failure exits with its stderr rather than producing a half table."""
    shown = " ".join(shlex.quote(c) for c in cmd)
    print(f"$ {shown}", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    except OSError as e:
        sys.exit(f"cannot run {cmd[0]}: {e}")
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {shown}\n{done.stderr[-4000:]}")
    return done.stdout


def json_lines(text):
    """The JSON objects among a tool's output lines (log lines around them are skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def ultra_bench(a, model, p, n):
    args = [a.ultra, "bench", "--backend", a.backend, "--model", model, "-p", str(p), "-n", str(n)]
    args += ["-r", str(a.runs), "--json", *shlex.split(a.ultra_args)]
    return json_lines(run(args))[-1]


def ultra_cells(a, model):
    pp = ultra_bench(a, model, a.prompt, a.gen)
    tg = pp if a.tg_depth is None else ultra_bench(a, model, a.tg_depth, a.gen)
    return {"pp": pp["prefill_tok_s"]["median"], "tg": tg["decode_tok_s"]["median"], "gb_s": tg["decode_weight_gb_s"]}


def llama_cells(a, model, env):
    args = [a.llama_bench, "-m", model, "-p", str(a.prompt), "-n", str(a.gen), "-r", str(a.runs), "-o", "json"]
    rows = json.loads(run(args + shlex.split(a.llama_args), env))
    cells = {}
    for row in rows:
        key = "pp" if row["n_gen"] == 0 else "tg"
        cells[key] = statistics.median(row["samples_ts"])
        cells[key + "_mean_sd"] = (row["avg_ts"], row["stddev_ts"])
    return cells


def batched(a, model, env_variants):
    args = [a.ultra, "bench", "--backend", a.backend, "--model", model, "-p", str(a.prompt), "-n", str(a.gen)]
    args += ["-r", "1", "--batch", a.batch, "--kv-type", a.batch_kv, "--json", *shlex.split(a.ultra_args)]
    points = json_lines(run(args))[-1]["batch"]["points"]
    out = {"ultra": {p["batch"]: p["decode_tok_s"]["median"] for p in points}}
    # Room for every sequence's prompt and tokens, plus a margin llama.cpp's cache rounding eats.
    ctx = (a.prompt + a.gen) * max(int(b) for b in a.batch.split(",")) + 512
    cmd = [a.batched_bench, "-m", model, "-c", str(ctx), "-b", "2048", "-ub", "512", "-npp", str(a.prompt)]
    cmd += ["-ntg", str(a.gen), "-npl", a.batch, "--output-format", "jsonl", *shlex.split(a.batched_args)]
    for name, env in env_variants:
        out[name] = {r["pl"]: r["speed_tg"] for r in json_lines(run(cmd, env))}
    return out


def variants(specs):
    """--variant NAME=K1=V1,K2=V2 (or NAME= for the plain environment) as (name, env) pairs."""
    out = []
    for spec in specs or ["llama.cpp="]:
        name, _, env = spec.partition("=")
        out.append((name, dict(kv.split("=", 1) for kv in env.split(",") if kv)))
    return out


def ratio(ours, theirs):
    return ours / theirs if theirs else None


def shown(x):
    return "—" if x is None else f"{x:.2f}"


def table(a, results, env_variants):
    head = f"| round | model | engine | pp{a.prompt} tok/s | × | tg{a.gen} tok/s | × |"
    lines = [head, "| ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    lows = {}
    for rnd, label, r in results["models"]:
        ours = r["ultra"]
        tg = f"{ours['tg']:,.1f} ({ours['gb_s']:,.0f} GB/s of weights)"
        lines.append(f"| {rnd} | {label} | ultra {a.backend} | {ours['pp']:,.1f} | | {tg} | |")
        for name, _ in env_variants:
            theirs = r[name]
            cells = []
            for key in ("pp", "tg"):
                mean, sd = theirs[key + "_mean_sd"]
                x = ratio(ours[key], theirs[key])
                lows.setdefault((name, key), []).append(x if x is not None else float("nan"))
                cells += [f"{theirs[key]:,.1f} ({mean:,.1f} ± {sd:,.1f})", shown(x)]
            lines.append(f"| {rnd} | {label} | {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for (name, key), xs in lows.items():
        lines.append(f"Lowest ultra / {name} {key}: {min(xs):.2f}×")
    for model, r in results.get("batched", {}).items():
        lines.append(f"\nBatched decode, aggregate tok/s ({os.path.basename(model)}, {a.prompt}-token prompts, "
                     f"{a.gen} tokens each, ultra's cache {a.batch_kv}):\n")
        lines.append("| B | ultra | " + " | ".join(f"{n} | ×" for n, _ in env_variants) + " |")
        lines.append("| ---: | ---: | " + " | ".join("---: | ---:" for _ in env_variants) + " |")
        for b, ours in sorted(r["ultra"].items()):
            cells = []
            for name, _ in env_variants:
                theirs = r[name].get(b, 0.0)
                cells += [f"{theirs:,.1f}", shown(ratio(ours, theirs))]
            lines.append(f"| {b} | {ours:,.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["cpu", "wgpu", "cuda"], required=True)
    ap.add_argument("--ultra", default="ultra")
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--batched-bench", help="llama-batched-bench, for --batched-model")
    ap.add_argument("--model", action="append", required=True, help="LABEL=PATH, repeatable")
    ap.add_argument("--batched-model", help="a GGUF for the batched-decode table")
    ap.add_argument("--batch", default="32,64")
    ap.add_argument("--batch-kv", default="f16", help="ultra's --kv-type for the batched table (llama.cpp keeps f16)")
    ap.add_argument("--variant", action="append", help="NAME=ENV=V,...: a llama.cpp run under extra environment")
    ap.add_argument("-p", "--prompt", type=int, default=512)
    ap.add_argument("-n", "--gen", type=int, default=128)
    ap.add_argument("-r", "--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1, help="repeat the per-model runs, engines alternating")
    ap.add_argument("--tg-depth", type=int, help="ultra's prompt for the decode cell (default: the -p prompt)")
    ap.add_argument("--llama-args", help="llama-bench flags (default per backend: %s)" % LLAMA_ARGS)
    ap.add_argument("--batched-args", default="-ngl 99 -fa on")
    ap.add_argument("--ultra-args", default="")
    ap.add_argument("--out", help="write every figure as JSON here too")
    a = ap.parse_args()
    a.llama_args = a.llama_args if a.llama_args is not None else LLAMA_ARGS[a.backend]
    env_variants = variants(a.variant)
    models = [spec.partition("=")[::2] for spec in a.model]
    if any(not path for _, path in models):
        sys.exit("--model: expected LABEL=PATH")
    results = {"models": []}
    for rnd in range(1, a.rounds + 1):
        for label, path in models:
            r = {name: llama_cells(a, path, env) for name, env in env_variants}
            r["ultra"] = ultra_cells(a, path)
            results["models"].append((rnd, label, r))
    if a.batched_model:
        if not a.batched_bench:
            sys.exit("--batched-model needs --batched-bench")
        results["batched"] = {a.batched_model: batched(a, a.batched_model, env_variants)}
    print(table(a, results, env_variants))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
