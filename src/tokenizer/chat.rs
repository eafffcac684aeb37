//! Chat templates: the Jinja template stored as `tokenizer.chat_template`, rendered with
//! minijinja the way Hugging Face `apply_chat_template` renders it: `trim_blocks` and
//! `lstrip_blocks` on, the variables `messages`, `add_generation_prompt`, `bos_token` and
//! `eos_token`, the helpers `raise_exception` and `strftime_now`, and the Python string and dict
//! methods templates call most (`.strip()`, `.startswith()`, `.items()`, ...). Anything a template
//! writes (a default system prompt, for instance) comes from the template itself.

#[cfg(not(target_arch = "wasm32"))]
use std::time::{SystemTime, UNIX_EPOCH};

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, ErrorKind};

use super::Tokenizer;
use crate::error::{Error, Result};

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant` (templates may know others, e.g. `tool`).
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }

    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("system", content)
    }

    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("user", content)
    }

    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("assistant", content)
    }

    fn to_value(&self) -> Value {
        Value::from_pairs([("role", self.role.as_str()), ("content", self.content.as_str())])
    }
}

impl Tokenizer {
    /// Renders the model's chat template. The result is meant to be encoded with
    /// `parse_special = true`, so that the markup it contains becomes control tokens.
    pub fn apply_chat_template(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let source =
            self.chat_template().ok_or_else(|| Error::Template("the model has no tokenizer.chat_template".into()))?;
        let token_text = |id: Option<u32>| id.and_then(|id| self.token_str(id)).unwrap_or("");
        let ids = self.special_ids();
        render_chat_template(source, messages, add_generation_prompt, token_text(ids.bos), token_text(ids.eos))
    }

    /// A prompt's token ids, as `ultra generate --prompt` makes them: chat-templated as one user
    /// message with `chat`, special tokens parsed, BOS first where the model's `add_bos_token`
    /// says so (llama.cpp `add_special = true`).
    pub fn encode_prompt(&self, text: &str, chat: bool) -> Result<Vec<u32>> {
        let mut text =
            if chat { self.apply_chat_template(&[ChatMessage::new("user", text)], true)? } else { text.to_string() };
        // A template that writes the BOS text itself (Gemma's) would give two BOS tokens.
        let bos = self.special_ids().bos.and_then(|id| self.token_str(id)).filter(|_| self.add_bos());
        if let Some(bos) = bos.filter(|bos| chat && !bos.is_empty() && text.starts_with(bos)) {
            text.drain(..bos.len());
        }
        self.encode_with_specials(&text, true)
    }
}

/// minijinja instructions (and units of about 64 bytes of values) one render may use. A template
/// comes from the model file: without a budget, nested loops (`range(100000)` twice) render for
/// hours and a string doubled in a loop exhausts memory. Real templates use a few hundred per
/// message; this allows some 4 million (and 256 MB of values), well under a second.
const TEMPLATE_FUEL: u64 = 4_000_000;

/// Renders any chat template source with the given special-token texts.
pub fn render_chat_template(
    source: &str,
    messages: &[ChatMessage],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
) -> Result<String> {
    let mut env = Environment::new();
    env.set_fuel(Some(TEMPLATE_FUEL));
    // HF renders with `trim_blocks=True, lstrip_blocks=True`; templates are written for that.
    let syntax = minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build();
    env.set_syntax(syntax.map_err(|e| Error::Template(e.to_string()))?);
    env.add_function("raise_exception", |message: String| -> std::result::Result<Value, minijinja::Error> {
        Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
    });
    env.add_function("strftime_now", |format: String| strftime(&format, unix_now()));
    env.set_unknown_method_callback(python_method);
    let messages: Vec<Value> = messages.iter().map(ChatMessage::to_value).collect();
    let ctx = Value::from_pairs([
        ("messages", Value::from(messages)),
        ("add_generation_prompt", Value::from(add_generation_prompt)),
        ("bos_token", Value::from(bos_token)),
        ("eos_token", Value::from(eos_token)),
    ]);
    env.render_str(source, ctx).map_err(|e| Error::Template(describe(&e)))
}

/// The error with its cause chain (minijinja puts the template line in the cause).
fn describe(err: &minijinja::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Python `str` and `dict` methods that HF chat templates call on values.
fn python_method(
    _state: &mut minijinja::State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> std::result::Result<Value, minijinja::Error> {
    let arg = |i: usize| args.get(i).and_then(|a| a.as_str());
    if let Some(s) = value.as_str().filter(|_| value.kind() == ValueKind::String) {
        let chars: Option<Vec<char>> = arg(0).map(|c| c.chars().collect());
        let strip = |c: char| chars.as_ref().map_or(c.is_whitespace(), |set| set.contains(&c));
        return Ok(match method {
            "strip" => Value::from(s.trim_matches(strip)),
            "lstrip" => Value::from(s.trim_start_matches(strip)),
            "rstrip" => Value::from(s.trim_end_matches(strip)),
            "lower" => Value::from(s.to_lowercase()),
            "upper" => Value::from(s.to_uppercase()),
            "startswith" => Value::from(arg(0).is_some_and(|p| s.starts_with(p))),
            "endswith" => Value::from(arg(0).is_some_and(|p| s.ends_with(p))),
            "replace" => match (arg(0), arg(1)) {
                (Some(from), Some(to)) => Value::from(s.replace(from, to)),
                _ => return Err(minijinja::Error::new(ErrorKind::MissingArgument, "replace(old, new)")),
            },
            "split" => match arg(0) {
                Some(sep) if !sep.is_empty() => s.split(sep).map(Value::from).collect(),
                _ => s.split_whitespace().map(Value::from).collect(),
            },
            _ => return Err(minijinja::Error::from(ErrorKind::UnknownMethod)),
        });
    }
    if value.kind() == ValueKind::Map {
        let pairs =
            || value.try_iter().into_iter().flatten().map(|k| (k.clone(), value.get_item(&k).unwrap_or_default()));
        return Ok(match method {
            "items" => pairs().map(|(k, v)| Value::from(vec![k, v])).collect(),
            "keys" => pairs().map(|(k, _)| k).collect(),
            "values" => pairs().map(|(_, v)| v).collect(),
            "get" => {
                let found = args.first().and_then(|k| value.get_item(k).ok()).filter(|v| !v.is_undefined());
                found.unwrap_or_else(|| args.get(1).cloned().unwrap_or(Value::from(())))
            }
            _ => return Err(minijinja::Error::from(ErrorKind::UnknownMethod)),
        });
    }
    Err(minijinja::Error::from(ErrorKind::UnknownMethod))
}

#[cfg(not(target_arch = "wasm32"))]
fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// std has no clock on wasm32-unknown-unknown: the page's.
#[cfg(target_arch = "wasm32")]
fn unix_now() -> i64 {
    (js_sys::Date::now() / 1e3) as i64
}

/// A small `strftime` (UTC) for templates that print today's date, e.g. Llama 3.1's
/// `strftime_now("%d %b %Y")`. Supports %Y %y %m %d %e %H %M %S %b %B %a %A %j %%; any other
/// directive is copied as written.
fn strftime(format: &str, unix: i64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let day_of_year = days - days_from_civil(year, 1, 1) + 1;
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(directive) = chars.next() else {
            out.push('%');
            break;
        };
        let month_name = MONTHS[(month - 1) as usize];
        match directive {
            'Y' => out.push_str(&year.to_string()),
            'y' => out.push_str(&format!("{:02}", year.rem_euclid(100))),
            'm' => out.push_str(&format!("{month:02}")),
            'd' => out.push_str(&format!("{day:02}")),
            'e' => out.push_str(&format!("{day:2}")),
            'H' => out.push_str(&format!("{:02}", secs / 3600)),
            'M' => out.push_str(&format!("{:02}", secs / 60 % 60)),
            'S' => out.push_str(&format!("{:02}", secs % 60)),
            'b' => out.push_str(&month_name[..3]),
            'B' => out.push_str(month_name),
            'a' => out.push_str(&DAYS[weekday][..3]),
            'A' => out.push_str(DAYS[weekday]),
            'j' => out.push_str(&format!("{day_of_year:03}")),
            '%' => out.push('%'),
            other => {
                out.push('%');
                out.push(other);
            }
        }
    }
    out
}

/// Days since 1970-01-01 → (year, month 1–12, day 1–31), proleptic Gregorian (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The inverse of `civil_from_days`.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(strftime("%Y-%m-%d %H:%M:%S", 0), "1970-01-01 00:00:00");
        // 2024-02-29 12:34:56 UTC, a Thursday, day 60.
        assert_eq!(strftime("%d %b %Y, %A %j %%", 1_709_210_096), "29 Feb 2024, Thursday 060 %");
        for days in [-800_000, -1, 0, 59, 11_016, 20_000, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn hf_helpers_and_whitespace_control() {
        let template = "{% for m in messages %}\n  {% if m.role == 'bad' %}{{ raise_exception('no ' + m.role) }}{% endif %}\n[{{ m['content'].strip() }}|{{ m.role.upper() }}]\n{% endfor %}{{ eos_token }}";
        let messages = [ChatMessage::user("  hi  "), ChatMessage::assistant("yo")];
        let out = render_chat_template(template, &messages, false, "<s>", "</s>").unwrap();
        assert_eq!(out, "[hi|USER]\n[yo|ASSISTANT]\n</s>");
        let err = render_chat_template(template, &[ChatMessage::new("bad", "x")], false, "", "").unwrap_err();
        assert!(err.to_string().contains("no bad"), "{err}");
        let dict = "{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}{{ 'a,b'.split(',') | length }}";
        assert_eq!(render_chat_template(dict, &[], false, "", "").unwrap(), "a=12");
        assert!(render_chat_template("{% if %}", &[], false, "", "").is_err());
    }

    #[test]
    fn a_template_that_never_ends_runs_out_of_fuel() {
        let nested = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
        let doubling = "{% set s = namespace(x='ab') %}{% for i in range(64) %}{% set s.x = s.x ~ s.x %}{% endfor %}";
        for template in [nested, doubling] {
            let err = render_chat_template(template, &[], false, "", "").unwrap_err().to_string();
            assert!(err.starts_with("chat template: engine ran out of fuel"), "{err}");
        }
    }
}
