//! The engine thread: it alone owns the runner and the scheduler. Handlers send it jobs through a
//! bounded channel; it answers each job through that job's own channel, token by token. Between
//! forward passes it takes new jobs and cancels those whose client went away (the job's receiver
//! is gone), so their pages go back to the pool before the next pass.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use tokio::sync::mpsc;

use crate::backend::Backend;
use crate::generate::rows::TokenLogprobs;
use crate::generate::sampler::Sampler;
use crate::generate::stop::{TextStream, TokenPieces};
use crate::generate::{Completion, Event, Extras, FinishReason, Request, Scheduler, SchedulerOptions};
use crate::model::Runner;
use crate::server::metrics::{Metrics, Outcome};

/// One request, ready to run: its tokens and settings, and where its events go.
pub struct Job {
    pub id: usize,
    pub prompt: Vec<u32>,
    pub max_tokens: usize,
    pub sampler: Sampler,
    pub stops: Vec<String>,
    pub logprobs: Option<usize>,
    pub arrived: Instant,
    pub events: mpsc::UnboundedSender<JobEvent>,
}

/// What a job hears back.
#[derive(Debug)]
pub enum JobEvent {
    Token {
        token: u32,
        text: String,
        logprobs: Option<TokenLogprobs>,
    },
    Done(Completion),
    /// The engine failed; the message says how.
    Failed(String),
}

/// What the engine needs besides its runner.
pub struct EngineConfig {
    pub eog: Vec<u32>,
    pub scheduler: SchedulerOptions,
    pub pieces: TokenPieces,
    pub metrics: Arc<Metrics>,
    /// Jobs running or waiting, shared with the handlers' admission check; the engine
    /// decrements it as jobs end.
    pub in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

struct Live {
    events: mpsc::UnboundedSender<JobEvent>,
    arrived: Instant,
    last_token: Option<Instant>,
}

/// Serves jobs until every sender of `jobs` is gone.
pub fn run<B: Backend>(mut runner: Runner<B>, config: EngineConfig, mut jobs: mpsc::Receiver<Job>) {
    config.metrics.kv_pages_total.store(runner.cache.layout.n_blocks as u64, Relaxed);
    let mut scheduler = Scheduler::new(&mut runner, config.eog.clone(), config.scheduler);
    let mut live: HashMap<usize, Live> = HashMap::new();
    publish(&scheduler, &config.metrics);
    loop {
        if scheduler.is_done() {
            match jobs.blocking_recv() {
                Some(job) => take(&mut scheduler, &mut live, &config, job),
                None => return,
            }
        }
        while let Ok(job) = jobs.try_recv() {
            take(&mut scheduler, &mut live, &config, job);
        }
        let gone: Vec<usize> = live.iter().filter(|(_, l)| l.events.is_closed()).map(|(&id, _)| id).collect();
        for id in gone {
            if let Err(e) = scheduler.cancel(id) {
                eprintln!("ultra serve: cancelling request {id}: {e}");
            }
            end(&mut live, &config, id, Outcome::Cancelled);
        }
        if !scheduler.is_done() {
            match scheduler.step_events() {
                Ok(events) => deliver(&mut live, &config, events),
                Err(e) => fail_all(&mut scheduler, &mut live, &config, &e.to_string()),
            }
        }
        publish(&scheduler, &config.metrics);
    }
}

fn take<B: Backend>(
    scheduler: &mut Scheduler<'_, B>,
    live: &mut HashMap<usize, Live>,
    config: &EngineConfig,
    job: Job,
) {
    let text = match TextStream::new(config.pieces.clone(), &job.stops) {
        Ok(t) => t,
        Err(e) => return refuse(config, job, e.to_string()),
    };
    let (prompt_len, id) = (job.prompt.len(), job.id);
    let request = Request { index: id, prompt: job.prompt, max_tokens: job.max_tokens, sampler: job.sampler };
    let events = job.events;
    match scheduler.submit_with(request, Extras { text: Some(text), logprobs: job.logprobs }) {
        Ok(()) => {
            config.metrics.prompt_tokens.fetch_add(prompt_len as u64, Relaxed);
            live.insert(id, Live { events, arrived: job.arrived, last_token: None });
        }
        Err(e) => {
            let _ = events.send(JobEvent::Failed(e.to_string()));
            config.in_flight.fetch_sub(1, Relaxed);
            config.metrics.count(Outcome::Rejected);
        }
    }
}

fn refuse(config: &EngineConfig, job: Job, message: String) {
    let _ = job.events.send(JobEvent::Failed(message));
    config.in_flight.fetch_sub(1, Relaxed);
    config.metrics.count(Outcome::Rejected);
}

fn deliver(live: &mut HashMap<usize, Live>, config: &EngineConfig, events: Vec<Event>) {
    let now = Instant::now();
    for event in events {
        match event {
            Event::Token { index, token, text, logprobs } => {
                config.metrics.generated_tokens.fetch_add(1, Relaxed);
                let Some(l) = live.get_mut(&index) else { continue };
                match l.last_token {
                    None => config.metrics.observe_ttft(now.duration_since(l.arrived).as_secs_f64()),
                    Some(t) => config.metrics.observe_itl(now.duration_since(t).as_secs_f64()),
                }
                l.last_token = Some(now);
                let _ = l.events.send(JobEvent::Token { token, text, logprobs });
            }
            Event::Done(c) => {
                if c.cached_prompt_tokens > 0 {
                    config.metrics.prefix_hits.fetch_add(1, Relaxed);
                    config.metrics.prefix_cached_tokens.fetch_add(c.cached_prompt_tokens as u64, Relaxed);
                }
                let outcome = match c.finish {
                    FinishReason::Eog | FinishReason::StopString => Outcome::Stop,
                    FinishReason::Length | FinishReason::Context => Outcome::Length,
                    FinishReason::Cancelled => Outcome::Cancelled,
                };
                let index = c.index;
                if let Some(l) = live.get(&index) {
                    let _ = l.events.send(JobEvent::Done(c));
                }
                end(live, config, index, outcome);
            }
        }
    }
}

/// A failed step leaves the batch in an unknown state: every job fails and the pool is emptied.
fn fail_all<B: Backend>(
    scheduler: &mut Scheduler<'_, B>,
    live: &mut HashMap<usize, Live>,
    config: &EngineConfig,
    message: &str,
) {
    eprintln!("ultra serve: a forward pass failed: {message}");
    let ids: Vec<usize> = live.keys().copied().collect();
    for id in ids {
        let _ = scheduler.cancel(id);
        if let Some(l) = live.get(&id) {
            let _ = l.events.send(JobEvent::Failed(message.to_string()));
        }
        end(live, config, id, Outcome::Failed);
    }
}

fn end(live: &mut HashMap<usize, Live>, config: &EngineConfig, id: usize, outcome: Outcome) {
    if live.remove(&id).is_some() {
        config.in_flight.fetch_sub(1, Relaxed);
        config.metrics.count(outcome);
    }
}

fn publish<B: Backend>(scheduler: &Scheduler<'_, B>, metrics: &Metrics) {
    metrics.running.store(scheduler.running() as u64, Relaxed);
    metrics.waiting.store(scheduler.waiting() as u64, Relaxed);
    metrics.kv_pages_in_use.store(scheduler.cache().blocks_in_use() as u64, Relaxed);
    metrics.kv_pages_free.store(scheduler.cache().free_blocks() as u64, Relaxed);
    metrics.draft_tokens.store(scheduler.spec.drafted, Relaxed);
    metrics.accepted_draft_tokens.store(scheduler.spec.accepted, Relaxed);
}
