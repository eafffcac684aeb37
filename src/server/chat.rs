//! The `messages` of a chat request, checked and rendered with the model's own chat template
//! (`--chat` in `ultra generate` goes through the same template and encoder).

use serde_json::{Map, Value};

use crate::server::error::{ApiError, ApiResult};
use crate::server::params::field;
use crate::tokenizer::{ChatMessage, Tokenizer};

const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// The prompt's token ids: the messages through the chat template, with the assistant's turn
/// opened.
pub fn prompt(tokenizer: &Tokenizer, map: &Map<String, Value>) -> ApiResult<Vec<u32>> {
    let messages = messages(map)?;
    let text = tokenizer
        .apply_chat_template(&messages, true)
        .map_err(|e| ApiError::param("messages", format!("the chat template refused the messages: {e}")))?;
    tokenizer.encode(&text, true).map_err(|e| ApiError::param("messages", e.to_string()))
}

fn messages(map: &Map<String, Value>) -> ApiResult<Vec<ChatMessage>> {
    let bad = |m: String| ApiError::param("messages", m);
    let list = match field(map, "messages") {
        None => return Err(bad("`messages` is required".into())),
        Some(Value::Array(list)) if list.is_empty() => return Err(bad("`messages` must not be empty".into())),
        Some(Value::Array(list)) => list,
        Some(v) => return Err(bad(format!("`messages` must be an array, got {v}"))),
    };
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            let m = m.as_object().ok_or_else(|| bad(format!("messages[{i}] must be an object")))?;
            let role = match field(m, "role") {
                Some(Value::String(r)) if ROLES.contains(&r.as_str()) => r.as_str(),
                other => return Err(bad(format!("messages[{i}].role must be one of {ROLES:?}, got {other:?}"))),
            };
            // The templates of small models know `system`; OpenAI's `developer` is the same turn.
            let role = if role == "developer" { "system" } else { role };
            let content = content(field(m, "content"), role).map_err(|m| bad(format!("messages[{i}].content {m}")))?;
            Ok(ChatMessage::new(role, content))
        })
        .collect()
}

/// A string, or an array of `{"type": "text", "text": ...}` parts joined; null only for an
/// assistant turn (one that called tools).
fn content(value: Option<&Value>, role: &str) -> Result<String, String> {
    match value {
        Some(Value::String(s)) => Ok(s.clone()),
        None if role == "assistant" => Ok(String::new()),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                (Some("text"), Some(text)) => Ok(text),
                _ => Err("parts must be {\"type\": \"text\", \"text\": ...}; this model reads text only".to_string()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|texts| texts.concat()),
        None => Err("is required".into()),
        Some(v) => Err(format!("must be a string or an array of text parts, got {v}")),
    }
}
