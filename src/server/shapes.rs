//! OpenAI's response shapes for both completion endpoints, whole and as stream chunks. A `Reply`
//! knows which endpoint it answers, so the handlers build every object through it.

use serde_json::{Value, json};

use crate::generate::Completion;
use crate::generate::rows::TokenLogprobs;
use crate::tokenizer::Tokenizer;

/// One answer in the making: which endpoint, its id, model and creation time.
pub struct Reply<'a> {
    pub chat: bool,
    pub id: String,
    pub model: &'a str,
    pub created: u64,
    pub tokenizer: &'a Tokenizer,
    pub include_usage: bool,
}

impl Reply<'_> {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.chat, chunk) {
            (true, false) => "chat.completion",
            (true, true) => "chat.completion.chunk",
            (false, _) => "text_completion",
        }
    }

    fn envelope(&self, chunk: bool, choice: Value) -> Value {
        let mut out = json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": [choice],
        });
        if chunk && self.include_usage {
            out["usage"] = Value::Null; // every chunk but the last carries a null usage
        }
        out
    }

    pub fn usage(c: &Completion) -> Value {
        json!({
            "prompt_tokens": c.prompt_tokens.len(),
            "completion_tokens": c.tokens.len(),
            "total_tokens": c.prompt_tokens.len() + c.tokens.len(),
            "prompt_tokens_details": { "cached_tokens": c.cached_prompt_tokens },
        })
    }

    /// The whole answer of a request that did not stream.
    pub fn whole(&self, c: &Completion, logprobs: Option<&[(u32, TokenLogprobs)]>, token_ids: bool) -> Value {
        let lp = logprobs.map_or(Value::Null, |l| self.logprobs(l));
        let mut choice = if self.chat {
            json!({ "index": 0, "message": { "role": "assistant", "content": c.text }, "logprobs": lp })
        } else {
            json!({ "index": 0, "text": c.text, "logprobs": lp })
        };
        choice["finish_reason"] = json!(c.finish.openai());
        if token_ids {
            choice["token_ids"] = json!(c.tokens);
        }
        let mut out = self.envelope(false, choice);
        out["usage"] = Reply::usage(c);
        if token_ids {
            out["prompt_token_ids"] = json!(c.prompt_tokens);
        }
        out
    }

    /// The opening chunk of a chat stream: the assistant's role.
    pub fn role_chunk(&self) -> Value {
        let choice = json!({ "index": 0, "delta": { "role": "assistant", "content": "" }, "logprobs": null, "finish_reason": null });
        self.envelope(true, choice)
    }

    /// A chunk of text (with the log-probabilities of the tokens that released it).
    pub fn text_chunk(&self, text: &str, logprobs: Option<&[(u32, TokenLogprobs)]>) -> Value {
        let lp = logprobs.map_or(Value::Null, |l| self.logprobs(l));
        let choice = if self.chat {
            json!({ "index": 0, "delta": { "content": text }, "logprobs": lp, "finish_reason": null })
        } else {
            json!({ "index": 0, "text": text, "logprobs": lp, "finish_reason": null })
        };
        self.envelope(true, choice)
    }

    /// The chunk that ends the choice.
    pub fn finish_chunk(&self, c: &Completion) -> Value {
        let choice = if self.chat {
            json!({ "index": 0, "delta": {}, "logprobs": null, "finish_reason": c.finish.openai() })
        } else {
            json!({ "index": 0, "text": "", "logprobs": null, "finish_reason": c.finish.openai() })
        };
        self.envelope(true, choice)
    }

    /// With `stream_options.include_usage`: no choices, just the usage.
    pub fn usage_chunk(&self, c: &Completion) -> Value {
        let mut out = self.envelope(true, Value::Null);
        out["choices"] = json!([]);
        out["usage"] = Reply::usage(c);
        out
    }

    fn logprobs(&self, tokens: &[(u32, TokenLogprobs)]) -> Value {
        let text = |id: u32| self.tokenizer.decode_lossy(&[id]);
        if self.chat {
            let entry = |id: u32, lp: f32| json!({ "token": text(id), "logprob": finite(lp), "bytes": self.tokenizer.decode(&[id]) });
            let content: Vec<Value> = tokens
                .iter()
                .map(|(id, lp)| {
                    let mut e = entry(*id, lp.logprob);
                    e["top_logprobs"] = lp.top.iter().map(|&(t, l)| entry(t, l)).collect();
                    e
                })
                .collect();
            json!({ "content": content })
        } else {
            let top: Vec<Value> = tokens
                .iter()
                .map(|(_, lp)| {
                    lp.top.iter().map(|&(t, l)| (text(t), json!(finite(l)))).collect::<serde_json::Map<_, _>>().into()
                })
                .collect();
            let mut offset = 0;
            let offsets: Vec<usize> = tokens
                .iter()
                .map(|(id, _)| {
                    let at = offset;
                    offset += text(*id).len();
                    at
                })
                .collect();
            json!({
                "tokens": tokens.iter().map(|(id, _)| text(*id)).collect::<Vec<_>>(),
                "token_logprobs": tokens.iter().map(|(_, lp)| finite(lp.logprob)).collect::<Vec<_>>(),
                "top_logprobs": top,
                "text_offset": offsets,
            })
        }
    }
}

/// `-inf` is not JSON: a log-probability of an impossible token is sent as a large negative.
pub fn finite(x: f32) -> f32 {
    if x.is_finite() { x } else { -9999.0 }
}
