//! `ultra perplexity`: llama-perplexity's figure for a text file (see generate/perplexity.rs).

use anyhow::{Context, Result};
use serde_json::json;

use super::{PerplexityArgs, with_backend};
use ultra::Backend;
use ultra::generate::perplexity;
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::Runner;
use ultra::tokenizer::Tokenizer;

pub fn run(args: PerplexityArgs) -> Result<()> {
    let gguf = args.model.open()?;
    with_backend!(args.backend, |be| run_on(be, &gguf, &args))
}

fn run_on<B: Backend>(backend: B, gguf: &Gguf, args: &PerplexityArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let tokenizer = Tokenizer::from_gguf(gguf)?;
    // As llama-perplexity: the whole file, special-token text left as text, BOS first where the
    // model's `add_bos_token` says so, and then every chunk starts with BOS (its first token is
    // context only, never scored, so replacing it changes no target).
    let mut tokens = tokenizer.encode_with_specials(&text, false)?;
    if let Some(bos) = tokenizer.special_ids().bos.filter(|_| tokenizer.add_bos()) {
        for chunk in tokens.chunks_mut(args.ctx.max(1)) {
            chunk[0] = bos;
        }
    }
    let layout = CacheLayout::plain(1, args.ctx).with_kv_dtype(args.kv_type.dtype());
    let placement = args.offload.placement(gguf, layout)?;
    let mut runner = Runner::load_placed(backend, gguf, layout, args.ctx, &placement)?;
    let batch = args.batch.unwrap_or(args.ctx);
    if !args.json {
        eprintln!("{} tokens, {} chunks of {}", tokens.len(), tokens.len() / args.ctx.max(1), args.ctx);
    }
    let result = perplexity(&mut runner, &tokens, args.ctx, batch, |chunk, running| {
        if !args.json {
            eprint!("[{}]{running:.4},", chunk + 1);
        }
    })?;
    if args.json {
        let out = json!({
            "ppl": result.ppl,
            "ppl_stderr": result.stderr,
            "n_chunks": result.n_chunks,
            "tokens_scored": result.tokens_scored,
        });
        println!("{out}");
    } else {
        eprintln!();
        println!("Final estimate: PPL = {:.4} +/- {:.5}", result.ppl, result.stderr);
    }
    Ok(())
}
