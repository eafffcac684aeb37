//! Request bodies, checked field by field: each wrong type or out-of-range value is a 400 naming
//! its parameter, as OpenAI answers. The body is read as loose JSON (unknown fields are ignored,
//! `null` means absent), so every client's extra fields pass.

use serde_json::{Map, Value};

use crate::generate::sampler::SamplerConfig;
use crate::generate::stop::MAX_STOPS;
use crate::server::error::{ApiError, ApiResult};

/// Most alternatives `top_logprobs` may ask for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The settings both completion endpoints share.
#[derive(Clone, Debug)]
pub struct Common {
    pub model: Option<String>,
    pub max_tokens: Option<usize>,
    pub sampler: SamplerConfig,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
    /// Alternatives per token when log-probabilities are asked for.
    pub logprobs: Option<usize>,
    /// Also return the prompt's and the completion's token ids (an extension, like vLLM's).
    pub return_token_ids: bool,
}

/// The JSON object of a body.
pub fn object(body: &[u8]) -> ApiResult<Map<String, Value>> {
    let text = std::str::from_utf8(body).map_err(|e| ApiError::invalid(format!("the body is not UTF-8: {e}")))?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::invalid("the body must be a JSON object")),
        Err(e) => Err(ApiError::invalid(format!("the body is not valid JSON: {e}"))),
    }
}

/// A field, None when absent or null.
pub fn field<'a>(map: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    map.get(name).filter(|v| !v.is_null())
}

fn number(map: &Map<String, Value>, name: &str, lo: f64, hi: f64) -> ApiResult<Option<f64>> {
    let Some(v) = field(map, name) else { return Ok(None) };
    let x = v.as_f64().ok_or_else(|| ApiError::param(name, format!("`{name}` must be a number, got {v}")))?;
    if !(lo..=hi).contains(&x) {
        return Err(ApiError::param(name, format!("`{name}` must be in [{lo}, {hi}], got {x}")));
    }
    Ok(Some(x))
}

fn integer(map: &Map<String, Value>, name: &str, lo: i64, hi: i64) -> ApiResult<Option<i64>> {
    let Some(v) = field(map, name) else { return Ok(None) };
    let x = v.as_i64().ok_or_else(|| ApiError::param(name, format!("`{name}` must be an integer, got {v}")))?;
    if !(lo..=hi).contains(&x) {
        return Err(ApiError::param(name, format!("`{name}` must be in [{lo}, {hi}], got {x}")));
    }
    Ok(Some(x))
}

pub fn boolean(map: &Map<String, Value>, name: &str) -> ApiResult<Option<bool>> {
    let Some(v) = field(map, name) else { return Ok(None) };
    v.as_bool().map(Some).ok_or_else(|| ApiError::param(name, format!("`{name}` must be true or false, got {v}")))
}

pub fn string<'a>(map: &'a Map<String, Value>, name: &str) -> ApiResult<Option<&'a str>> {
    let Some(v) = field(map, name) else { return Ok(None) };
    v.as_str().map(Some).ok_or_else(|| ApiError::param(name, format!("`{name}` must be a string, got {v}")))
}

/// `stop`: a string or up to four strings, none empty.
fn stops(map: &Map<String, Value>) -> ApiResult<Vec<String>> {
    let bad = || ApiError::param("stop", format!("`stop` must be a string or an array of up to {MAX_STOPS} strings"));
    let list = match field(map, "stop") {
        None => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => {
            items.iter().map(|v| v.as_str().map(str::to_string).ok_or_else(bad)).collect::<ApiResult<Vec<_>>>()?
        }
        Some(_) => return Err(bad()),
    };
    if list.len() > MAX_STOPS {
        return Err(bad());
    }
    if list.iter().any(String::is_empty) {
        return Err(ApiError::param("stop", "stop strings must not be empty"));
    }
    Ok(list)
}

/// The shared parameters. `chat` picks how `logprobs` is spelled: a boolean with `top_logprobs`
/// (chat), or the number of alternatives (legacy completions, at most 5).
pub fn common(map: &Map<String, Value>, chat: bool) -> ApiResult<Common> {
    let model = string(map, "model")?.map(str::to_string);
    if let Some(n) = integer(map, "n", i64::MIN, i64::MAX)?
        && n != 1
    {
        return Err(ApiError::param("n", format!("only n = 1 is supported, got {n}")));
    }
    if let Some(b) = integer(map, "best_of", i64::MIN, i64::MAX)?
        && b != 1
    {
        return Err(ApiError::param("best_of", format!("only best_of = 1 is supported, got {b}")));
    }
    if boolean(map, "echo")? == Some(true) {
        return Err(ApiError::param("echo", "echo is not supported"));
    }
    if field(map, "suffix").is_some() {
        return Err(ApiError::param("suffix", "suffix is not supported"));
    }
    let max_tokens = match integer(map, "max_completion_tokens", 1, u32::MAX as i64)? {
        Some(n) => Some(n),
        None => integer(map, "max_tokens", 1, u32::MAX as i64)?,
    };
    let defaults = SamplerConfig::default();
    let f =
        |name, lo, hi, default: f32| -> ApiResult<f32> { Ok(number(map, name, lo, hi)?.map_or(default, |x| x as f32)) };
    let seed = match field(map, "seed") {
        None => 0,
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_i64().map(|x| x as u64))
            .ok_or_else(|| ApiError::param("seed", format!("`seed` must be an integer, got {v}")))?,
    };
    let sampler = SamplerConfig {
        temperature: f("temperature", 0.0, 2.0, defaults.temperature)?,
        top_p: f("top_p", 0.0, 1.0, defaults.top_p)?,
        top_k: integer(map, "top_k", -1, 1 << 20)?.map_or(0, |k| k.max(0) as usize),
        min_p: f("min_p", 0.0, 1.0, defaults.min_p)?,
        repeat_penalty: f("repeat_penalty", 0.01, 10.0, defaults.repeat_penalty)?,
        frequency_penalty: f("frequency_penalty", -2.0, 2.0, 0.0)?,
        presence_penalty: f("presence_penalty", -2.0, 2.0, 0.0)?,
        seed,
        ..defaults
    };
    let logprobs = if chat {
        let top = integer(map, "top_logprobs", 0, MAX_TOP_LOGPROBS as i64)?;
        match boolean(map, "logprobs")? {
            Some(true) => Some(top.unwrap_or(0) as usize),
            _ if top.is_some() => return Err(ApiError::param("top_logprobs", "top_logprobs needs logprobs: true")),
            _ => None,
        }
    } else {
        integer(map, "logprobs", 0, 5)?.map(|n| n as usize)
    };
    let include_usage = match field(map, "stream_options") {
        None => false,
        Some(Value::Object(o)) => boolean(o, "include_usage")?.unwrap_or(false),
        Some(v) => {
            return Err(ApiError::param("stream_options", format!("`stream_options` must be an object, got {v}")));
        }
    };
    Ok(Common {
        model,
        max_tokens: max_tokens.map(|n| n as usize),
        sampler,
        stop: stops(map)?,
        stream: boolean(map, "stream")?.unwrap_or(false),
        include_usage,
        logprobs,
        return_token_ids: boolean(map, "return_token_ids")?.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> ApiResult<Common> {
        common(&object(body.as_bytes())?, true)
    }

    #[test]
    fn each_bad_field_names_its_parameter() {
        for (body, param) in [
            (r#"{"temperature": "hot"}"#, "temperature"),
            (r#"{"temperature": 3}"#, "temperature"),
            (r#"{"top_p": -0.1}"#, "top_p"),
            (r#"{"max_tokens": 0}"#, "max_tokens"),
            (r#"{"max_tokens": 1.5}"#, "max_tokens"),
            (r#"{"n": 2}"#, "n"),
            (r#"{"stop": ["a", "b", "c", "d", "e"]}"#, "stop"),
            (r#"{"stop": [1]}"#, "stop"),
            (r#"{"stream": "yes"}"#, "stream"),
            (r#"{"top_logprobs": 30, "logprobs": true}"#, "top_logprobs"),
            (r#"{"frequency_penalty": 9}"#, "frequency_penalty"),
            (r#"{"seed": "x"}"#, "seed"),
        ] {
            let err = parse(body).unwrap_err();
            assert_eq!(err.param.as_deref(), Some(param), "{body}: {err:?}");
            assert_eq!(err.status, 400, "{body}");
        }
    }

    #[test]
    fn good_fields_reach_the_sampler() {
        let c = parse(
            r#"{"temperature": 0.5, "top_k": 7, "seed": 3, "stop": "x", "max_completion_tokens": 9,
                         "logprobs": true, "top_logprobs": 2, "stream": true, "stream_options": {"include_usage": true},
                         "unknown": [1, 2], "user": "u"}"#,
        )
        .unwrap();
        assert_eq!((c.sampler.temperature, c.sampler.top_k, c.sampler.seed), (0.5, 7, 3));
        assert_eq!((c.stop, c.max_tokens, c.logprobs), (vec!["x".to_string()], Some(9), Some(2)));
        assert!(c.stream && c.include_usage);
        assert!(c.sampler.validate().is_ok());
    }

    #[test]
    fn bodies_that_are_not_json_objects_are_refused() {
        for body in [&b"{"[..], b"[]", b"\xff\xfe", b"null", b""] {
            assert_eq!(object(body).unwrap_err().status, 400);
        }
    }
}
