//! Prompts for the speculative bench: the reference prompts of `smollm2/greedy.json` (in
//! `$ULTRA_REFS`, else this repository's `tests/data`), else a built-in set of the same kinds.
//! Either way the set includes a long repetitive text, where prompt-lookup drafting shines, and
//! short open-ended ones, where it has nothing to copy.

use std::path::PathBuf;

use super::speculative::SpecPrompt;
use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;

/// Built-in prompts: (name, text). The last one repeats itself on purpose.
const BUILT_IN: [(&str, &str); 4] = [
    ("prose", "The old lighthouse keeper climbed the spiral stairs every evening, and on the"),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"),
    ("json", "{\"name\": \"Alice\", \"age\": 30, \"languages\": [\"English\", \"French\"], \"address\": {\"city\": \""),
    (
        "long_repetitive",
        "Every morning the baker lit the oven, kneaded the dough, shaped the loaves and set them to rise. \
         Every morning the baker lit the oven, kneaded the dough, shaped the loaves and set them to rise. \
         Every morning the baker lit the oven, kneaded the dough, shaped the loaves and set them to rise. \
         Every morning the baker lit the oven,",
    ),
];

/// Where the reference prompts are, if anywhere.
pub fn reference_file() -> Option<PathBuf> {
    let dirs = [
        std::env::var_os("ULTRA_REFS").filter(|d| !d.is_empty()).map(PathBuf::from),
        Some(PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data"))),
    ];
    dirs.into_iter().flatten().map(|d| d.join("smollm2/greedy.json")).find(|f| f.is_file())
}

/// The reference prompts (tokenized by `tokenizer`, special tokens parsed, as the reference
/// run did), or the built-in ones when no reference file is found. Returns where they came from.
pub fn bench_prompts(tokenizer: &Tokenizer) -> Result<(Vec<SpecPrompt>, String)> {
    let Some(file) = reference_file() else {
        let prompts = BUILT_IN
            .iter()
            .map(|(name, text)| Ok(SpecPrompt { name: name.to_string(), ids: tokenizer.encode(text, true)? }))
            .collect::<Result<Vec<_>>>()?;
        return Ok((prompts, "built-in".into()));
    };
    let text = std::fs::read_to_string(&file).map_err(Error::file(&file))?;
    let bad = |why: &str| Error::InvalidArgument(format!("{}: {why}", file.display()));
    let refs: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    let cases = refs["prompts"].as_array().ok_or_else(|| bad("no `prompts` array"))?;
    let mut prompts = Vec::new();
    for case in cases {
        let (Some(name), Some(text)) = (case["name"].as_str(), case["prompt"].as_str()) else {
            return Err(bad("a prompt without `name` or `prompt`"));
        };
        prompts.push(SpecPrompt { name: name.to_string(), ids: tokenizer.encode(text, true)? });
    }
    Ok((prompts, file.display().to_string()))
}
