//! `ultra generate --prompts-file F`: every prompt of a JSON-lines file, decoded together with
//! continuous batching; with `--json`, one object per prompt and line, as each completes.

use std::io::{BufRead, Write};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::GenerateArgs;
use super::request::{encode_prompt, merge, pool_json, sampler_config};
use ultra::Backend;
use ultra::generate::sampler::Sampler;
use ultra::generate::{Request, Scheduler, SchedulerOptions};
use ultra::gguf::Gguf;
use ultra::model::{Config, Runner};
use ultra::tokenizer::Tokenizer;

/// The `prompt` field of every non-empty line.
fn read_prompts(args: &GenerateArgs) -> Result<Vec<String>> {
    let path = args.prompts_file.as_ref().expect("batch mode has a prompts file");
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut prompts = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("{}:{}: not JSON", path.display(), i + 1))?;
        match value["prompt"].as_str() {
            Some(p) => prompts.push(p.to_string()),
            None => bail!("{}:{}: expected {{\"prompt\": \"...\"}}", path.display(), i + 1),
        }
    }
    Ok(prompts)
}

pub fn run_on<B: Backend>(backend: B, gguf: &Gguf, args: &GenerateArgs) -> Result<()> {
    let tokenizer = Tokenizer::from_gguf(gguf)?;
    let config = Config::from_gguf(gguf)?;
    let context = super::context_size(args.ctx, config.context_length);
    let prompts = read_prompts(args)?;
    let max_seqs = args.max_batch.max(1);
    let layout = args.cache.layout(max_seqs, context);
    let placement = args.offload.placement(gguf, layout)?;
    let mut runner = Runner::load_placed(backend, gguf, layout, context, &placement)?;
    let eog = tokenizer.eog_ids().to_vec();
    let opts = SchedulerOptions { max_seqs, max_batch_tokens: args.batch.max(1), speculate: 0 };
    let mut scheduler = Scheduler::new(&mut runner, eog.clone(), opts);
    for (index, text) in prompts.iter().enumerate() {
        let mut config = sampler_config(args);
        config.seed = config.seed.wrapping_add(index as u64);
        let prompt = encode_prompt(&tokenizer, text, args.chat)?;
        scheduler.submit(Request { index, prompt, max_tokens: args.max_tokens, sampler: Sampler::new(config)? })?;
    }
    let started = std::time::Instant::now();
    let mut stdout = std::io::stdout().lock();
    let mut generated = 0usize;
    scheduler.run(|c| {
        generated += c.tokens.len();
        let text_ids: Vec<u32> = c.tokens.iter().copied().filter(|id| !eog.contains(id)).collect();
        let text = String::from_utf8_lossy(&tokenizer.decode(&text_ids)).into_owned();
        if args.json {
            let out = json!({
                "index": c.index,
                "prompt_tokens": c.prompt_tokens,
                "tokens": c.tokens,
                "text": text,
                "cached_prompt_tokens": c.cached_prompt_tokens,
                "preemptions": c.preemptions,
                "target_forward_passes": c.forward_passes,
                "pages_allocated": c.pool.allocated,
                "pages_freed": c.pool.freed,
                "pages_reused": c.pool.reused,
                "pages_in_use_at_end": c.pages_in_use,
            });
            writeln!(stdout, "{out}")?;
        } else {
            writeln!(stdout, "--- [{}] {}{text}", c.index, prompts[c.index])?;
        }
        Ok(())
    })?;
    let (steps, preemptions) = (scheduler.steps, scheduler.preemptions);
    let secs = started.elapsed().as_secs_f64();
    if args.json {
        let mut summary = json!({
            "summary": true,
            "prompts": prompts.len(),
            "generated_tokens": generated,
            "target_forward_passes": steps,
            "preemptions": preemptions,
            "aggregate_tok_s": generated as f64 / secs,
        });
        merge(&mut summary, pool_json(&runner.cache));
        writeln!(stdout, "{summary}")?;
    } else {
        eprintln!(
            "[{} prompts, {generated} tokens in {steps} forward passes, {:.1} tok/s aggregate]",
            prompts.len(),
            generated as f64 / secs
        );
    }
    Ok(())
}
