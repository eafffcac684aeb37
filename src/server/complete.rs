//! `POST /v1/chat/completions` and `POST /v1/completions`: check the body, tokenize, admit the
//! job (429/503 with Retry-After when the queue is full), then answer whole or as server-sent
//! events ending with `data: [DONE]`. A stream's job ends when its client goes away: the body
//! stream owns the job's receiver, and the engine cancels jobs whose receiver is gone.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::generate::Completion;
use crate::generate::rows::TokenLogprobs;
use crate::generate::sampler::Sampler;
use crate::server::engine::{Job, JobEvent};
use crate::server::error::{ApiError, ApiResult, json_response};
use crate::server::metrics::Outcome;
use crate::server::params::{self, Common, field};
use crate::server::shapes::Reply;
use crate::server::{Shared, chat};

pub async fn handle(shared: Arc<Shared>, body: Bytes, is_chat: bool) -> Response {
    let (common, rx, id) = match start(&shared, &body, is_chat) {
        Ok(started) => started,
        Err(e) => {
            shared.metrics.count(Outcome::Rejected);
            return e.into_response();
        }
    };
    if common.stream {
        return sse(shared, id, is_chat, common, rx, now());
    }
    let reply = Reply {
        chat: is_chat,
        id,
        model: &shared.model_name,
        created: now(),
        tokenizer: &shared.tokenizer,
        include_usage: common.include_usage,
    };
    whole(&reply, &common, rx).await
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Everything up to admission; what fails here is the client's to fix (or a full queue).
fn start(
    shared: &Shared,
    body: &[u8],
    is_chat: bool,
) -> ApiResult<(Common, mpsc::UnboundedReceiver<JobEvent>, String)> {
    let map = params::object(body)?;
    let common = params::common(&map, is_chat)?;
    if let Some(name) = &common.model
        && name != &shared.model_name
    {
        return Err(ApiError::model_not_found(name));
    }
    let prompt = if is_chat { chat::prompt(&shared.tokenizer, &map)? } else { completion_prompt(shared, &map)? };
    let context = shared.context;
    if prompt.len() >= context {
        let message = format!("the prompt has {} tokens; this server's context is {context}", prompt.len());
        return Err(ApiError::param("messages", message).with_code("context_length_exceeded"));
    }
    let room = context - prompt.len();
    let max_tokens = match common.max_tokens {
        Some(n) if n > room => {
            let message = format!(
                "{} prompt tokens + max_tokens {n} exceed this server's context of {context} tokens",
                prompt.len()
            );
            return Err(ApiError::param("max_tokens", message).with_code("context_length_exceeded"));
        }
        Some(n) => n,
        None => room,
    };
    let sampler = Sampler::new(common.sampler.clone()).map_err(|e| ApiError::invalid(e.to_string()))?;
    if shared.in_flight.fetch_add(1, Relaxed) >= shared.max_queue {
        shared.in_flight.fetch_sub(1, Relaxed);
        return Err(ApiError::queue_full(shared.max_queue));
    }
    let (events, rx) = mpsc::unbounded_channel();
    let id = shared.next_id.fetch_add(1, Relaxed);
    let job = Job {
        id,
        prompt,
        max_tokens,
        sampler,
        stops: common.stop.clone(),
        logprobs: common.logprobs,
        arrived: Instant::now(),
        events,
    };
    if let Err(e) = shared.jobs.try_send(job) {
        shared.in_flight.fetch_sub(1, Relaxed);
        return Err(match e {
            mpsc::error::TrySendError::Full(_) => ApiError::unavailable("the engine's queue is full; retry shortly"),
            mpsc::error::TrySendError::Closed(_) => ApiError::unavailable("the engine has stopped"),
        });
    }
    let prefix = if is_chat { "chatcmpl" } else { "cmpl" };
    Ok((common, rx, format!("{prefix}-{id}")))
}

/// `prompt`: a string, one string in an array, or token ids (an array of integers).
fn completion_prompt(shared: &Shared, map: &Map<String, Value>) -> ApiResult<Vec<u32>> {
    let bad = |m: &str| ApiError::param("prompt", m.to_string());
    let tokens = match field(map, "prompt") {
        None => return Err(bad("`prompt` is required")),
        Some(Value::String(s)) => encode(shared, s)?,
        Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => {
            encode(shared, items[0].as_str().expect("checked"))?
        }
        Some(Value::Array(items)) if !items.is_empty() && items.iter().all(Value::is_number) => items
            .iter()
            .map(|v| match v.as_u64() {
                Some(id) if (id as usize) < shared.vocab => Ok(id as u32),
                _ => Err(bad(&format!("token ids must be integers below the vocabulary size {}", shared.vocab))),
            })
            .collect::<ApiResult<_>>()?,
        Some(Value::Array(items)) if items.len() > 1 => return Err(bad("only one prompt per request is supported")),
        Some(_) => return Err(bad("`prompt` must be a string or an array of token ids")),
    };
    if tokens.is_empty() {
        return Err(bad("the prompt is empty"));
    }
    Ok(tokens)
}

fn encode(shared: &Shared, text: &str) -> ApiResult<Vec<u32>> {
    shared.tokenizer.encode(text, true).map_err(|e| ApiError::param("prompt", e.to_string()))
}

/// Waits for the whole completion.
async fn whole(reply: &Reply<'_>, common: &Common, mut rx: mpsc::UnboundedReceiver<JobEvent>) -> Response {
    let mut logprobs: Vec<(u32, TokenLogprobs)> = Vec::new();
    while let Some(event) = rx.recv().await {
        match event {
            JobEvent::Token { token, logprobs: Some(lp), .. } => logprobs.push((token, lp)),
            JobEvent::Token { .. } => {}
            JobEvent::Done(c) => {
                let lp = common.logprobs.map(|_| &logprobs[..]);
                return json_response(StatusCode::OK, &reply.whole(&c, lp, common.return_token_ids));
            }
            JobEvent::Failed(message) => return ApiError::engine(message).into_response(),
        }
    }
    ApiError::engine("the engine stopped before the request finished").into_response()
}

/// Where a stream stands.
struct Streaming {
    shared: Arc<Shared>,
    id: String,
    chat: bool,
    created: u64,
    common: Common,
    rx: mpsc::UnboundedReceiver<JobEvent>,
    /// Bytes of text sent so far (the completion's text starts with them).
    sent: usize,
    opened: bool,
    done: bool,
}

impl Streaming {
    fn reply(&self) -> Reply<'_> {
        Reply {
            chat: self.chat,
            id: self.id.clone(),
            model: &self.shared.model_name,
            created: self.created,
            tokenizer: &self.shared.tokenizer,
            include_usage: self.common.include_usage,
        }
    }

    /// The next piece of the event stream, None once `[DONE]` went out.
    async fn next(&mut self) -> Option<String> {
        if self.done {
            return None;
        }
        if !self.opened {
            self.opened = true;
            if self.chat {
                return Some(data(&self.reply().role_chunk()));
            }
        }
        loop {
            let event = self.rx.recv().await;
            match event {
                Some(JobEvent::Token { token, text, logprobs }) => {
                    if text.is_empty() && logprobs.is_none() {
                        continue;
                    }
                    self.sent += text.len();
                    let lp = logprobs.map(|lp| vec![(token, lp)]);
                    return Some(data(&self.reply().text_chunk(&text, lp.as_deref())));
                }
                Some(JobEvent::Done(c)) => return Some(self.finish(&c)),
                Some(JobEvent::Failed(message)) => return Some(self.fail(&message)),
                None => return Some(self.fail("the engine stopped before the request finished")),
            }
        }
    }

    fn finish(&mut self, c: &Completion) -> String {
        self.done = true;
        let reply = self.reply();
        let mut out = String::new();
        if let Some(rest) = c.text.get(self.sent..).filter(|r| !r.is_empty()) {
            out.push_str(&data(&reply.text_chunk(rest, None)));
        }
        out.push_str(&data(&reply.finish_chunk(c)));
        if self.common.include_usage {
            out.push_str(&data(&reply.usage_chunk(c)));
        }
        out.push_str("data: [DONE]\n\n");
        out
    }

    fn fail(&mut self, message: &str) -> String {
        self.done = true;
        format!("{}data: [DONE]\n\n", data(&ApiError::engine(message).body()))
    }
}

fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn sse(
    shared: Arc<Shared>,
    id: String,
    chat: bool,
    common: Common,
    rx: mpsc::UnboundedReceiver<JobEvent>,
    created: u64,
) -> Response {
    let state = Streaming { shared, id, chat, created, common, rx, sent: 0, opened: false, done: false };
    let events = stream::unfold(state, |mut s| async move {
        let piece = s.next().await?;
        Some((Ok::<_, std::convert::Infallible>(Bytes::from(piece)), s))
    });
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    (headers, Body::from_stream(events)).into_response()
}
