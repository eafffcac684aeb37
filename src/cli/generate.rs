//! `ultra generate`: one prompt, streamed to stdout (or one JSON object with `--json`).

use std::io::Write;

use anyhow::Result;
use serde_json::json;

use super::{GenerateArgs, context_size, with_backend};
use ultra::Backend;
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::{GenerateOptions, generate};
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Config, Runner};
use ultra::tokenizer::{ChatMessage, StreamDecoder, Tokenizer};

pub fn run(args: GenerateArgs) -> Result<()> {
    let gguf = args.model.open()?;
    with_backend!(args.backend, |be| run_on(be, &gguf, &args))
}

fn run_on<B: Backend>(backend: B, gguf: &Gguf, args: &GenerateArgs) -> Result<()> {
    let tokenizer = Tokenizer::from_gguf(gguf)?;
    let config = Config::from_gguf(gguf)?;
    let context = context_size(args.ctx, config.context_length);
    let mut runner = Runner::new(backend, gguf, CacheLayout::plain(1, context), context)?;
    let text = if args.chat {
        tokenizer.apply_chat_template(&[ChatMessage::new("user", &args.prompt)], true)?
    } else {
        args.prompt.clone()
    };
    let prompt = tokenizer.encode(&text, true)?;
    let mut sampler = Sampler::new(SamplerConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        repeat_penalty: args.repeat_penalty,
        seed: args.seed,
        ..SamplerConfig::default()
    });
    let opts = GenerateOptions { max_tokens: args.max_tokens, prefill_chunk: args.batch, eog: tokenizer.eog_ids().to_vec() };
    let seq = runner.cache.add_seq();
    let mut stream = StreamDecoder::new();
    let mut stdout = std::io::stdout().lock();
    let generation = generate(&mut runner, seq, &prompt, &mut sampler, &opts, |id| {
        if !args.json && !opts.eog.contains(&id) {
            stdout.write_all(stream.push(&tokenizer, id).as_bytes())?;
            stdout.flush()?;
        }
        Ok(())
    })?;
    let text_ids: Vec<u32> = generation.tokens.iter().copied().filter(|id| !opts.eog.contains(id)).collect();
    if args.json {
        let text = String::from_utf8_lossy(&tokenizer.decode(&text_ids)).into_owned();
        let out = json!({
            "prompt_tokens": prompt,
            "tokens": generation.tokens,
            "text": text,
            "prefill_tok_s": generation.prefill_tok_s(),
            "decode_tok_s": generation.decode_tok_s(),
        });
        writeln!(stdout, "{out}")?;
    } else {
        stdout.write_all(stream.flush().as_bytes())?;
        writeln!(stdout)?;
        eprintln!(
            "\n[{} prompt tokens, {:.1} tok/s prefill; {} generated, {:.1} tok/s decode; {} backend]",
            prompt.len(),
            generation.prefill_tok_s(),
            generation.tokens.len(),
            generation.decode_tok_s(),
            runner.backend.name()
        );
    }
    Ok(())
}
