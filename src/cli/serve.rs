//! `ultra serve`: loads the model on an engine thread (which then owns the runner and the
//! scheduler) and serves the OpenAI-compatible API from `ultra::server`.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{BackendName, CacheArgs, DraftMode, ModelArgs, SpecArgs, context_size, with_backend};
use ultra::generate::SchedulerOptions;
use ultra::generate::stop::TokenPieces;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Config, Runner};
use ultra::server::engine::{self, EngineConfig};
use ultra::server::{ServeOptions, Wiring};
use ultra::tokenizer::Tokenizer;

/// Tokens the default page pool holds (at least four full contexts).
const DEFAULT_POOL_TOKENS: usize = 32768;

#[derive(Args, Clone, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[arg(long, value_enum, default_value_t = BackendName::Cpu)]
    pub backend: BackendName,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// 0 picks a free port (the address is printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Tokens per sequence, prompt plus completion (default: the model's, at most 4096).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// Most sequences in the running batch.
    #[arg(long, default_value_t = 64)]
    pub max_batch: usize,
    /// Most requests running or waiting; more get 429 with Retry-After.
    #[arg(long, default_value_t = 256)]
    pub max_queue: usize,
    /// Most tokens in one forward pass (decode tokens plus prompt chunks).
    #[arg(long, default_value_t = 512)]
    pub batch: usize,
    /// Require `Authorization: Bearer KEY` (all routes but /health and /openapi.json).
    #[arg(long)]
    pub api_key: Option<String>,
    /// The name requests and /v1/models use (default: the model file's stem).
    #[arg(long)]
    pub served_name: Option<String>,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub offload: super::OffloadArgs,
    #[command(flatten)]
    pub spec: SpecArgs,
}

pub fn run(args: ServeArgs) -> Result<()> {
    let speculate = match args.spec.draft_mode {
        DraftMode::None => 0,
        DraftMode::Lookup if args.spec.speculate > 0 && !args.spec.adaptive_k => args.spec.speculate,
        DraftMode::Lookup if args.spec.adaptive_k => {
            bail!("the server speculates with a fixed --speculate K; drop --adaptive-k")
        }
        DraftMode::Lookup => bail!("--draft-mode lookup needs --speculate K with K ≥ 1"),
        other => bail!(
            "the server speculates with --draft-mode lookup only; --draft-mode {} takes `ultra generate`",
            format!("{other:?}").to_lowercase()
        ),
    };
    let path = args.model.path()?;
    let gguf = args.model.open()?;
    let tokenizer = Tokenizer::from_gguf(&gguf)?;
    let config = Config::from_gguf(&gguf)?;
    let context = context_size(args.ctx, config.context_length);
    let page = args.cache.page_size.max(1);
    let pages = args.cache.cache_pages.unwrap_or(DEFAULT_POOL_TOKENS.max(4 * context).div_ceil(page));
    let layout = CacheLayout::paged(page, pages).with_kv_dtype(args.cache.kv_type.dtype());
    // A sequence longer than the pool could never be admitted; the context check then refuses
    // it up front with a 400 instead of failing the batch.
    let context = context.min(pages * page);
    let name = args
        .served_name
        .clone()
        .unwrap_or_else(|| path.file_stem().map_or_else(|| "model".to_string(), |s| s.to_string_lossy().into_owned()));
    let pieces: TokenPieces = Arc::new(
        (0..tokenizer.vocab_size() as u32)
            .map(|id| if tokenizer.is_eog(id) { Vec::new() } else { tokenizer.decode(&[id]) })
            .collect(),
    );
    let wiring = Wiring::new(args.max_queue);
    let engine_config = EngineConfig {
        eog: tokenizer.eog_ids().to_vec(),
        scheduler: SchedulerOptions { max_seqs: args.max_batch.max(1), max_batch_tokens: args.batch.max(1), speculate },
        pieces,
        metrics: wiring.metrics.clone(),
        in_flight: wiring.in_flight.clone(),
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let backend = args.backend;
    let placement = args.offload.placement(&gguf, layout)?;
    let jobs_rx = wiring.jobs_rx;
    std::thread::Builder::new().name("ultra-engine".into()).spawn(move || {
        let load = || -> Result<()> {
            with_backend!(backend, |be| {
                let runner = Runner::load_placed(be, &gguf, layout, context, &placement)?;
                let _ = ready_tx.send(Ok(()));
                engine::run(runner, engine_config, jobs_rx);
                Ok(())
            })
        };
        if let Err(e) = load() {
            let _ = ready_tx.send(Err(e));
        }
    })?;
    ready_rx.recv().context("the engine thread ended while loading the model")??;
    eprintln!(
        "ultra serve: {} backend, context {context}, {pages} KV pages of {page} tokens, up to {} sequences per batch",
        format!("{:?}", args.backend).to_lowercase(),
        args.max_batch
    );
    let opts = ServeOptions {
        host: args.host,
        port: args.port,
        model_name: name,
        api_key: args.api_key,
        max_queue: args.max_queue,
        context,
    };
    let result = ultra::server::serve(opts, tokenizer, wiring.jobs_tx, wiring.in_flight.clone(), wiring.metrics);
    if wiring.in_flight.load(Relaxed) > 0 {
        eprintln!("ultra serve: stopped with requests in flight");
    }
    Ok(result?)
}
