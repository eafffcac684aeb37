//! `ultra serve`: an OpenAI-compatible HTTP server (tokio + axum) on the continuous-batching
//! scheduler. One engine thread owns the runner and the scheduler (`engine.rs`); handlers check
//! and tokenize requests, then talk to it through a bounded job channel and a channel per job.
//!
//! Routes: `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`, `GET /health`,
//! `POST /tokenize`, `POST /detokenize`, `GET /metrics`, `GET /openapi.json` (`routes.rs`).

mod chat;
mod complete;
pub mod engine;
pub mod error;
pub mod metrics;
pub mod params;
mod routes;
mod shapes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use tokio::sync::mpsc;

use crate::error::{Error, Result};
use crate::server::engine::Job;
use crate::server::metrics::Metrics;
use crate::tokenizer::Tokenizer;

/// Largest request body accepted (413 above).
pub const MAX_BODY: usize = 4 << 20;

/// How the server listens and what it admits.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub host: String,
    pub port: u16,
    /// The name requests use for the model (and `/v1/models` lists).
    pub model_name: String,
    /// Bearer token required on every route but `/health` and `/openapi.json`.
    pub api_key: Option<String>,
    /// Most requests running or waiting; more get 429.
    pub max_queue: usize,
    /// Tokens per sequence (prompt plus completion).
    pub context: usize,
}

/// What every handler reads.
pub struct Shared {
    pub model_name: String,
    pub tokenizer: Tokenizer,
    pub context: usize,
    pub vocab: usize,
    pub api_key: Option<String>,
    pub max_queue: usize,
    pub jobs: mpsc::Sender<Job>,
    /// Jobs admitted and not yet ended (the engine decrements it).
    pub in_flight: Arc<AtomicUsize>,
    pub metrics: Arc<Metrics>,
    pub next_id: AtomicUsize,
    pub started: u64,
}

/// The channel and counters the engine thread needs, made before the server starts.
pub struct Wiring {
    pub jobs_rx: mpsc::Receiver<Job>,
    pub jobs_tx: mpsc::Sender<Job>,
    pub in_flight: Arc<AtomicUsize>,
    pub metrics: Arc<Metrics>,
}

impl Wiring {
    pub fn new(max_queue: usize) -> Wiring {
        let (jobs_tx, jobs_rx) = mpsc::channel(max_queue.max(1));
        Wiring { jobs_rx, jobs_tx, in_flight: Arc::default(), metrics: Arc::default() }
    }
}

/// Serves until Ctrl-C or SIGTERM. `jobs`, `in_flight` and `metrics` are the ones the engine thread holds.
pub fn serve(
    opts: ServeOptions,
    tokenizer: Tokenizer,
    jobs: mpsc::Sender<Job>,
    in_flight: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
) -> Result<()> {
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let shared = Arc::new(Shared {
        model_name: opts.model_name.clone(),
        vocab: tokenizer.vocab_size(),
        tokenizer,
        context: opts.context,
        api_key: opts.api_key.clone(),
        max_queue: opts.max_queue,
        jobs,
        in_flight,
        metrics,
        next_id: AtomicUsize::new(0),
        started,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind((opts.host.as_str(), opts.port))
            .await
            .map_err(|e| Error::InvalidArgument(format!("cannot listen on {}:{}: {e}", opts.host, opts.port)))?;
        let addr: SocketAddr = listener.local_addr()?;
        println!("ultra serve: model `{}` listening on http://{addr}", opts.model_name);
        let shutdown = async {
            #[cfg(unix)]
            {
                use tokio::signal::unix::{SignalKind, signal};
                match signal(SignalKind::terminate()) {
                    Ok(mut term) => {
                        tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term.recv() => {} }
                    }
                    Err(_) => {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            }
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
        };
        axum::serve(listener, routes::router(shared)).with_graceful_shutdown(shutdown).await?;
        Ok(())
    })
}
