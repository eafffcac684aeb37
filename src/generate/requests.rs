//! What the scheduler takes in and reports: a request and its extras (text stream, log-
//! probabilities), the events of a step, and a finished request with its reason.

use crate::generate::rows::TokenLogprobs;
use crate::generate::sampler::Sampler;
use crate::generate::stop::TextStream;
use crate::kv_cache::PoolStats;

/// One prompt to complete.
pub struct Request {
    pub index: usize,
    pub prompt: Vec<u32>,
    pub max_tokens: usize,
    pub sampler: Sampler,
}

/// What a request wants besides its tokens; the default is neither.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// Detokenize as tokens come and end at the stream's stop strings.
    pub text: Option<TextStream>,
    /// Report each token's log-probability and this many alternatives (reads back full logits).
    pub logprobs: Option<usize>,
}

/// Why a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token (it is the last token).
    Eog,
    /// A stop string matched (the text ends before it).
    StopString,
    /// `max_tokens` tokens were generated.
    Length,
    /// The sequence filled the context.
    Context,
    /// `Scheduler::cancel`.
    Cancelled,
}

impl FinishReason {
    /// OpenAI's `finish_reason`.
    pub fn openai(self) -> &'static str {
        match self {
            FinishReason::Eog | FinishReason::StopString => "stop",
            FinishReason::Length | FinishReason::Context => "length",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// What one step reports, in order.
#[derive(Clone, Debug)]
pub enum Event {
    /// Request `index` sampled `token`; `text` is what it released (with a `TextStream`).
    Token { index: usize, token: u32, text: String, logprobs: Option<TokenLogprobs> },
    /// Request `index` finished (its last token was reported just before).
    Done(Completion),
}

/// A finished request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub index: usize,
    pub prompt_tokens: Vec<u32>,
    pub tokens: Vec<u32>,
    pub stopped_at_eog: bool,
    pub finish: FinishReason,
    /// The whole text, stop string excluded (empty without a `TextStream`).
    pub text: String,
    /// Prompt tokens taken from the prefix cache at (first) admission.
    pub cached_prompt_tokens: usize,
    pub preemptions: usize,
    /// Forward passes of the whole batch so far, when this request completed.
    pub forward_passes: u64,
    /// The page pool's counters when this request completed.
    pub pool: PoolStats,
    pub pages_in_use: usize,
}
