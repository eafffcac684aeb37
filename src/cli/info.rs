//! `ultra info`: what a GGUF holds, and what the engine makes of it.

use anyhow::Result;

use super::InfoArgs;
use ultra::model::{Config, weight_format_summary};
use ultra::tokenizer::{Tokenizer, TokenizerKind};

pub fn run(args: InfoArgs) -> Result<()> {
    let gguf = args.model.open()?;
    println!(
        "GGUF v{}, {} metadata entries, {} tensors, alignment {}",
        gguf.version,
        gguf.metadata.len(),
        gguf.tensors.len(),
        gguf.alignment
    );
    println!("\nmetadata:");
    for (key, value) in &gguf.metadata {
        println!("  {key:<44} {value}");
    }
    println!("\ntensors:");
    for t in &gguf.tensors {
        let dims: Vec<String> = t.dims.iter().map(u64::to_string).collect();
        println!("  {:<32} {:<8} [{}] {} bytes", t.name, t.type_name(), dims.join(", "), t.n_bytes);
    }
    let formats: Vec<String> = weight_format_summary(&gguf).iter().map(|(f, n)| format!("{n} {}", f.name())).collect();
    println!("\nformats: {}", formats.join(", "));
    match Config::from_gguf(&gguf) {
        Ok(c) => {
            println!(
                "model: {} — {} layers, d_model {}, d_ff {}, {} heads / {} kv heads × {}, vocab {}, rope θ {} ({:?}), ctx {}",
                c.arch.name(),
                c.n_layers,
                c.d_model,
                c.d_ff,
                c.n_heads,
                c.n_kv_heads,
                c.head_dim,
                c.vocab_size,
                c.rope.theta,
                c.rope.style,
                c.context_length
            );
            let local: Vec<_> = c.layers.iter().filter(|l| l.window.is_some()).collect();
            if let Some(first) = local.first() {
                println!(
                    "  sliding window {} on {} of {} layers (their rope θ {}), the rest global",
                    first.window.unwrap_or(0),
                    local.len(),
                    c.n_layers,
                    first.rope.theta
                );
            }
            println!(
                "  {:?} gate, attention scale {}, embedding scale {}, q/k norms {}, post-norms {}",
                c.activation, c.attn_scale, c.embed_scale, c.qk_norm, c.post_norms
            );
        }
        Err(e) => println!("model: not runnable by this engine: {e}"),
    }
    match Tokenizer::from_gguf(&gguf) {
        Ok(t) => {
            let ids = t.special_ids();
            let kind = match t.kind() {
                TokenizerKind::Bpe => format!("byte-level BPE ({} merges)", t.n_merges()),
                TokenizerKind::SentencePiece => format!("SentencePiece (add_space_prefix {})", t.add_space_prefix()),
            };
            let id = |id: Option<u32>| id.map_or("none".to_string(), |id| id.to_string());
            println!(
                "tokenizer: {kind}, {} tokens, bos {} (added: {}), eos {} (added: {}), end of generation {:?}",
                t.vocab_size(),
                id(ids.bos),
                t.add_bos(),
                id(ids.eos),
                t.add_eos(),
                t.eog_ids()
            );
        }
        Err(e) => println!("tokenizer: not usable by this engine: {e}"),
    }
    if let Some(backend) = args.backend {
        println!("backend: {backend:?}");
        #[cfg(feature = "wgpu")]
        if backend == super::BackendName::Wgpu {
            println!("{}", ultra::Wgpu::new()?.describe());
        }
        #[cfg(feature = "cuda")]
        if backend == super::BackendName::Cuda {
            println!("device: {}", ultra::Cuda::new(0)?.describe()?);
        }
    }
    Ok(())
}
