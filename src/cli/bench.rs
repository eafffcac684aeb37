//! `ultra bench`: prefill (pp) and decode (tg) tok/s; with `--batch`, aggregate decode tok/s of
//! B sequences together; with `--draft-mode`, speculative decoding against plain decoding on
//! the reference prompts. The measuring is in `ultra::bench`; this file picks and prints.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::{BenchArgs, DraftMode, with_backend};
use ultra::Backend;
use ultra::bench::{self, DraftSource};
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Llama, Runner};
use ultra::tokenizer::Tokenizer;

pub fn run(args: BenchArgs) -> Result<()> {
    if let Some(url) = &args.serve {
        return serve(url, &args);
    }
    let gguf = args.model.open()?;
    with_backend!(args.backend, |be| run_on(be, &gguf, &args))
}

fn run_on<B: Backend>(backend: B, gguf: &Gguf, args: &BenchArgs) -> Result<()> {
    let (p, n, runs, kv) = (args.prompt_tokens, args.gen_tokens, args.runs, args.kv_type.dtype());
    if let Some(layers) = &args.gpu_layers {
        return offload(Arc::new(backend), gguf, &layers.0, args);
    }
    let model = Arc::new(Llama::load(&backend, gguf)?);
    let backend = Arc::new(backend);
    let mut out = json!({ "backend": backend.name(), "load_avg": bench::load_average() });
    let plain_only = args.batch.is_none() && args.draft_mode.is_empty();
    if plain_only {
        let mut runner =
            Runner::new(backend.clone(), model.clone(), CacheLayout::plain(1, p + n).with_kv_dtype(kv), p + n)?;
        let report = bench::bench(&mut runner, p, n, runs)?;
        super::request::merge(&mut out, serde_json::to_value(&report)?);
        // Weight bytes × tok/s: the bandwidth decode achieves, to hold against the device's.
        let weights = bench::decode_weight_bytes(gguf);
        let gb_s = weights as f64 * report.decode_tok_s.median / 1e9;
        out["decode_weight_bytes"] = json!(weights);
        out["decode_weight_gb_s"] = json!(gb_s);
        if !args.json {
            let (pre, dec) = (&report.prefill_tok_s, &report.decode_tok_s);
            println!("backend {} | {} runs", backend.name(), pre.runs.len());
            println!("pp{p:<5} {:>9.1} tok/s  (min {:.1}, max {:.1})", pre.median, pre.min, pre.max);
            println!("tg{n:<5} {:>9.1} tok/s  (min {:.1}, max {:.1})", dec.median, dec.min, dec.max);
            println!("decode reads {:.3} GB of weights a token: {gb_s:.1} GB/s at the median", weights as f64 / 1e9);
        }
    }
    if let Some(list) = &args.batch {
        let max_b = list.0.iter().copied().max().unwrap_or(1);
        let mut runner =
            Runner::new(backend.clone(), model.clone(), CacheLayout::plain(max_b, p + n).with_kv_dtype(kv), p + n)?;
        let report = bench::bench_batch(&mut runner, p, n, &list.0, runs)?;
        if !args.json {
            println!("batched decode | p {p}, n {n} per sequence, {runs} runs | aggregate tok/s");
            println!("{:>5} {:>10} {:>10} {:>10} {:>8}", "B", "median", "min", "max", "×B=1");
            for pt in &report.points {
                let t = &pt.decode_tok_s;
                println!(
                    "{:>5} {:>10.1} {:>10.1} {:>10.1} {:>8.2}",
                    pt.batch, t.median, t.min, t.max, pt.speedup_vs_b1
                );
            }
        }
        if let Some(path) = &args.plot {
            let title = format!("{} on {}: batched decode (p {p}, n {n})", model_stem(args), backend.name());
            std::fs::write(path, bench::batch::svg(&report, &title))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        out["batch"] = serde_json::to_value(&report)?;
    }
    if !args.draft_mode.is_empty() {
        let report = speculative(&backend, &model, gguf, args)?;
        out["speculative"] = report;
    }
    // Load before and after: on a shared machine this says how far to trust the figures.
    out["load_avg_end"] = json!(bench::load_average());
    if args.json {
        println!("{out}");
    }
    Ok(())
}

/// The drafters asked for (`none` adds none: plain decoding is always measured).
fn sources<B: Backend>(backend: &B, model: &Llama<B>, args: &BenchArgs) -> Result<Vec<DraftSource<B>>> {
    let mut out = Vec::new();
    for mode in &args.draft_mode {
        out.push(match mode {
            DraftMode::None => continue,
            DraftMode::Ngram => DraftSource::Ngram,
            DraftMode::Lookup => DraftSource::Lookup,
            DraftMode::SelfLayers => {
                DraftSource::SelfLayers(args.draft_layers.unwrap_or((model.config.n_layers / 4).max(1)))
            }
            DraftMode::Model => {
                let path = args.draft_model.as_ref().context("--draft-mode model needs --draft-model PATH")?;
                let gguf = ultra::hf::open_model(path, None)
                    .with_context(|| format!("loading draft model {}", path.display()))?;
                let draft = Llama::load(backend, &gguf)?;
                if draft.config.vocab_size != model.config.vocab_size {
                    bail!(
                        "the draft model's vocabulary ({}) differs from the target's ({})",
                        draft.config.vocab_size,
                        model.config.vocab_size
                    );
                }
                DraftSource::Model(Arc::new(draft))
            }
        });
    }
    Ok(out)
}

fn speculative<B: Backend>(backend: &Arc<B>, model: &Arc<Llama<B>>, gguf: &Gguf, args: &BenchArgs) -> Result<Value> {
    let tokenizer = Tokenizer::from_gguf(gguf)?;
    let (prompts, source) = bench::bench_prompts(&tokenizer)?;
    let ks = &args.speculate.0;
    let (layout, context) = bench::target_layout(&prompts, args.gen_tokens, ks.iter().copied().max().unwrap_or(1));
    let target = Runner::new(backend.clone(), model.clone(), layout, context)?;
    let sources = sources(&**backend, model, args)?;
    let report =
        bench::bench_speculative(target, &prompts, args.gen_tokens, &sources, ks, args.runs, tokenizer.eog_ids())?;
    if !args.json {
        let plain = &report.plain_decode_tok_s;
        println!(
            "speculative decoding | {} prompts from {source} | ≤{} tokens each | {} runs",
            prompts.len(),
            args.gen_tokens,
            plain.runs.len()
        );
        println!("plain greedy: {:.1} tok/s (min {:.1}, max {:.1})", plain.median, plain.min, plain.max);
        println!(
            "{:<7} {:>2} {:>9} {:>9} {:>8} {:>8} {:>8}  same tokens",
            "mode", "k", "accept", "mean len", "speedup", "min", "max"
        );
        for pt in &report.points {
            let s = &pt.speedup;
            println!(
                "{:<7} {:>2} {:>8.1}% {:>9.2} {:>7.2}× {:>7.2}× {:>7.2}×  {}",
                pt.mode,
                pt.k,
                100.0 * pt.acceptance_rate.median,
                pt.mean_accepted_len.median,
                s.median,
                s.min,
                s.max,
                pt.matches_plain
            );
        }
    }
    let mut value = serde_json::to_value(&report)?;
    value["prompt_source"] = source.into();
    Ok(value)
}

/// `--serve URL`: the load generator against a running server.
fn serve(url: &str, args: &BenchArgs) -> Result<()> {
    let opts = bench::serve::ServeBench {
        url: url.to_string(),
        clients: args.clients.0.clone(),
        prompt_tokens: args.prompt_tokens,
        gen_tokens: args.gen_tokens,
        api_key: args.api_key.clone(),
    };
    let load_avg = bench::load_average();
    let points = bench::serve::bench_serve(&opts)?;
    if args.json {
        let out = json!({ "serve": url, "load_avg": load_avg, "load_avg_end": bench::load_average(),
                          "prompt_tokens": args.prompt_tokens, "gen_tokens": args.gen_tokens, "points": points });
        println!("{out}");
        return Ok(());
    }
    println!("serving {url} | p {}, n {} per client | load {load_avg:?}", args.prompt_tokens, args.gen_tokens);
    println!(
        "{:>7} {:>10} {:>12} {:>12} {:>11} {:>11}",
        "clients", "tok/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms"
    );
    for p in &points {
        println!(
            "{:>7} {:>10.1} {:>12.0} {:>12.0} {:>11.1} {:>11.1}",
            p.clients, p.aggregate_tok_s, p.ttft_p50_ms, p.ttft_p99_ms, p.itl_p50_ms, p.itl_p99_ms
        );
    }
    println!("load at the end {:?}", bench::load_average());
    Ok(())
}

/// The model file's name without its extension, for plot titles.
fn model_stem(args: &BenchArgs) -> String {
    args.model.model.as_deref().map_or("model".into(), |m| {
        std::path::Path::new(m).file_stem().map_or(m.into(), |s| s.to_string_lossy().into_owned())
    })
}

/// `--gpu-layers`: the offload table, and its plot with `--plot`.
fn offload<B: Backend>(backend: Arc<B>, gguf: &Gguf, layers: &[usize], args: &BenchArgs) -> Result<()> {
    let (p, n, runs) = (args.prompt_tokens, args.gen_tokens, args.runs);
    let name = backend.name();
    let report = bench::offload::bench_offload(backend, gguf, layers, &args.prefetch.0, p, n, runs)?;
    if let Some(path) = &args.plot {
        let title = format!("{} on {name}: tok/s against resident layers (pp{p}, tg{n})", model_stem(args));
        std::fs::write(path, bench::offload::svg(&report, &title))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", json!({ "backend": name, "load_avg": bench::load_average(), "offload": report }));
        return Ok(());
    }
    let link = &report.link_gb_s;
    println!(
        "backend {name} | link: plain copy of {} MiB host memory {:.1} GB/s (min {:.1}, max {:.1})",
        report.link_bytes >> 20,
        link.median,
        link.min,
        link.max
    );
    println!(
        "{:>4} {:>4} {:>8} {:>10} {:>10} {:>12} {:>10} {:>7}",
        "N", "d", "streamed", "pp tok/s", "tg tok/s", "MB/token", "GB/s", "% link"
    );
    for pt in &report.points {
        println!(
            "{:>4} {:>4} {:>8} {:>10.1} {:>10.2} {:>12.1} {:>10.1} {:>6.0}%",
            pt.gpu_layers,
            pt.prefetch,
            pt.layers_streamed,
            pt.prefill_tok_s.median,
            pt.decode_tok_s.median,
            pt.bytes_per_pass as f64 / 1e6,
            pt.decode_stream_gb_s,
            100.0 * pt.decode_stream_gb_s / link.median.max(1e-9)
        );
    }
    Ok(())
}
