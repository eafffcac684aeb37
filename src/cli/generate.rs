//! `ultra generate`: one prompt, streamed to stdout (or one JSON object with `--json`), plainly
//! or with speculative decoding. `--prompts-file` goes to `batch.rs`.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::request::{encode_prompt, merge, pool_json, sampler_config};
use super::{DraftMode, GenerateArgs, context_size, with_backend};
use ultra::Backend;
use ultra::generate::sampler::Sampler;
use ultra::generate::{
    Drafter, GenerateOptions, Generation, LookupDrafter, ModelDrafter, NgramDrafter, SpecOptions, SpecStats, generate,
    generate_speculative,
};
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Config, Llama, Runner};
use ultra::tokenizer::Tokenizer;

pub fn run(args: GenerateArgs) -> Result<()> {
    let gguf = args.model.open()?;
    if args.prompts_file.is_some() {
        if args.spec.draft_mode != DraftMode::None {
            bail!("--prompts-file runs plain batched decoding; speculative decoding takes one --prompt");
        }
        return with_backend!(args.backend, |be| super::batch::run_on(be, &gguf, &args));
    }
    with_backend!(args.backend, |be| run_on(be, &gguf, &args))
}

fn drafter<B: Backend>(
    args: &GenerateArgs,
    target: &Runner<B>,
    layout: CacheLayout,
    context: usize,
) -> Result<Option<Box<dyn Drafter>>> {
    let draft_sampler = |seed_offset: u64| -> Result<Option<Sampler>> {
        let mut c = sampler_config(args);
        c.seed ^= seed_offset;
        Ok(if c.is_greedy() { None } else { Some(Sampler::new(c)?) })
    };
    Ok(match args.spec.draft_mode {
        DraftMode::None => None,
        DraftMode::Ngram => Some(Box::new(NgramDrafter::new(3))),
        DraftMode::Lookup => Some(Box::new(LookupDrafter::new(3))),
        DraftMode::SelfLayers => {
            let depth = args.spec.draft_layers.unwrap_or((target.config().n_layers / 4).max(1));
            let r = Runner::with_depth(target.backend.clone(), target.model.clone(), layout, context, depth)?;
            Some(Box::new(ModelDrafter::new(r, draft_sampler(0x5eed)?, args.batch).warmed_up()?))
        }
        DraftMode::Model => {
            let path = args.spec.draft_model.as_ref().context("--draft-mode model needs --draft-model PATH")?;
            let gguf =
                ultra::hf::open_model(path, None).with_context(|| format!("loading draft model {}", path.display()))?;
            let model = Llama::load(&*target.backend, &gguf)?;
            if model.config.vocab_size != target.config().vocab_size {
                bail!(
                    "the draft model's vocabulary ({}) differs from the target's ({})",
                    model.config.vocab_size,
                    target.config().vocab_size
                );
            }
            let r = Runner::new(target.backend.clone(), Arc::new(model), layout, context)?;
            Some(Box::new(ModelDrafter::new(r, draft_sampler(0x5eed)?, args.batch).warmed_up()?))
        }
    })
}

fn run_on<B: Backend>(backend: B, gguf: &Gguf, args: &GenerateArgs) -> Result<()> {
    let tokenizer = Tokenizer::from_gguf(gguf)?;
    let config = Config::from_gguf(gguf)?;
    let context = context_size(args.ctx, config.context_length);
    let layout = args.cache.layout(1, context);
    let placement = args.offload.placement(gguf, layout)?;
    let mut runner = Runner::load_placed(backend, gguf, layout, context, &placement)?;
    let prompt = encode_prompt(&tokenizer, args.prompt.as_deref().unwrap_or_default(), args.chat)?;
    let mut sampler = Sampler::new(sampler_config(args))?;
    let opts =
        GenerateOptions { max_tokens: args.max_tokens, prefill_chunk: args.batch, eog: tokenizer.eog_ids().to_vec() };
    let seq = runner.cache.add_seq();
    let mut stream = tokenizer.stream_decoder();
    let mut stdout = std::io::stdout().lock();
    let mut print = |id: u32| -> ultra::Result<()> {
        if !args.json && !opts.eog.contains(&id) {
            stdout.write_all(stream.push(id).as_bytes())?;
            stdout.flush()?;
        }
        Ok(())
    };
    let (generation, spec): (Generation, Option<SpecStats>) = match drafter(args, &runner, layout, context)? {
        None => (generate(&mut runner, seq, &prompt, &mut sampler, &opts, &mut print)?, None),
        Some(mut d) => {
            let spec = SpecOptions { k: args.spec.speculate.max(1), adaptive: args.spec.adaptive_k, k_max: 16 };
            let (g, s) =
                generate_speculative(&mut runner, seq, &prompt, &mut sampler, &opts, d.as_mut(), spec, &mut print)?;
            (g, Some(s))
        }
    };
    runner.cache.remove_seq(seq)?;
    let text_ids: Vec<u32> = generation.tokens.iter().copied().filter(|id| !opts.eog.contains(id)).collect();
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let text = String::from_utf8_lossy(&tokenizer.decode(&text_ids)).into_owned();
        let mut out = json!({
            "prompt_tokens": prompt,
            "tokens": generation.tokens,
            "text": text,
            "prefill_tok_s": generation.prefill_tok_s(),
            "decode_tok_s": generation.decode_tok_s(),
            "cached_prompt_tokens": generation.cached_prompt_tokens,
            "target_forward_passes": runner.forward_passes,
        });
        merge(&mut out, super::request::offload_json(&runner));
        merge(&mut out, pool_json(&runner.cache));
        if let Some(s) = spec {
            merge(
                &mut out,
                json!({
                    "acceptance_rate": s.acceptance_rate(),
                    "mean_accepted_len": s.mean_accepted_len(),
                    "drafted": s.drafted,
                    "accepted": s.accepted,
                    "draft_forward_passes": s.draft_forward_passes,
                }),
            );
        }
        writeln!(stdout, "{out}")?;
    } else {
        stdout.write_all(stream.flush().as_bytes())?;
        writeln!(stdout)?;
        eprintln!(
            "\n[{} prompt tokens, {:.1} tok/s prefill; {} generated, {:.1} tok/s decode; {} backend{}]",
            prompt.len(),
            generation.prefill_tok_s(),
            generation.tokens.len(),
            generation.decode_tok_s(),
            runner.backend.name(),
            spec.map(|s| format!("; {:.0}% of drafts accepted", 100.0 * s.acceptance_rate())).unwrap_or_default()
        );
    }
    Ok(())
}
