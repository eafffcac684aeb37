//! `ultra bench`: prefill (pp) and decode (tg) tok/s, median/min/max of r runs.

use anyhow::Result;

use super::{BenchArgs, with_backend};
use ultra::Backend;
use ultra::bench::bench;
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::Runner;

pub fn run(args: BenchArgs) -> Result<()> {
    let gguf = args.model.open()?;
    with_backend!(args.backend, |be| run_on(be, &gguf, &args))
}

fn run_on<B: Backend>(backend: B, gguf: &Gguf, args: &BenchArgs) -> Result<()> {
    let context = args.prompt_tokens + args.gen_tokens;
    let mut runner = Runner::load(backend, gguf, CacheLayout::plain(1, context), context)?;
    let report = bench(&mut runner, args.prompt_tokens, args.gen_tokens, args.runs)?;
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["backend"] = runner.backend.name().into();
        println!("{value}");
    } else {
        let (p, d) = (&report.prefill_tok_s, &report.decode_tok_s);
        println!("backend {} | {} runs", runner.backend.name(), p.runs.len());
        println!("pp{:<5} {:>9.1} tok/s  (min {:.1}, max {:.1})", report.prompt_tokens, p.median, p.min, p.max);
        println!("tg{:<5} {:>9.1} tok/s  (min {:.1}, max {:.1})", report.gen_tokens, d.median, d.min, d.max);
    }
    Ok(())
}
