//! From the command line to what the engine takes, and back: the sampler settings, the prompt's
//! tokens, and the JSON fields every `--json` output shares. Used by `generate` and `batch`.

use anyhow::Result;
use serde_json::{Value, json};

use super::GenerateArgs;
use ultra::Backend;
use ultra::generate::sampler::SamplerConfig;
use ultra::kv_cache::KvCache;
use ultra::tokenizer::Tokenizer;

pub fn sampler_config(args: &GenerateArgs) -> SamplerConfig {
    SamplerConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        repeat_penalty: args.repeat_penalty,
        seed: args.seed,
        ..SamplerConfig::default()
    }
}

/// The prompt's token ids (`Tokenizer::encode_prompt`).
pub fn encode_prompt(tokenizer: &Tokenizer, text: &str, chat: bool) -> Result<Vec<u32>> {
    Ok(tokenizer.encode_prompt(text, chat)?)
}

/// Page-pool figures every `--json` output reports.
pub fn pool_json<B: Backend>(cache: &KvCache<B>) -> Value {
    let s = cache.stats();
    json!({
        "pages_allocated": s.allocated,
        "pages_freed": s.freed,
        "pages_reused": s.reused,
        "pages_in_use_at_end": cache.blocks_in_use(),
    })
}

/// Layer offload figures of `generate --json`.
pub fn offload_json<B: Backend>(runner: &ultra::model::Runner<B>) -> Value {
    let (resident, streamed) = runner.model.weights.resident_and_streamed();
    json!({ "layers_resident": resident, "layers_streamed": streamed, "bytes_streamed": runner.bytes_streamed })
}

/// Adds `extra`'s fields to `out` (both JSON objects).
pub fn merge(out: &mut Value, extra: Value) {
    if let (Some(o), Value::Object(e)) = (out.as_object_mut(), extra) {
        o.extend(e);
    }
}
