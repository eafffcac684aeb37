//! Pre-tokenizers: the regex splits that cut text into words before BPE, chosen by
//! `tokenizer.ggml.pre`. Each entry mirrors llama.cpp's `llm_tokenizer_bpe` table: a list of
//! regexes applied in turn, where each regex splits every fragment left by the previous one into
//! its matches *and* the gaps between them (llama.cpp `unicode_regex_split`). Adding a model's
//! split is one row in `TABLE`.
//!
//! A regex only sees its own fragment: look-ahead stops at the fragment's end. This matters for
//! `\s+(?!\S)`: in smollm, digits are cut out first, so in `"a  1"` the run `"  "` ends its
//! fragment and stays whole, instead of giving its last space to the next word.
//!
//! No pattern here uses look-around, so fancy-regex hands them all to its linear-time engine.
//! A backtracking `\s+(?!\S)` runs out of stack on a long run of spaces (about a million), and
//! tokenizing must not fail on any text. Instead, capture group 1 marks a whitespace run that
//! follows the `\s+(?!\S)|\s+` rule, applied in `split_one`: a run followed by more text in the
//! fragment gives its last character back. (The run is maximal, so what follows is not space.)

use fancy_regex::Regex;

use crate::error::{Error, Result};

/// GPT-2's pattern, ending in `\s+(?!\S)|\s+` written as `(\s+)`. llama.cpp lists it without the
/// final `|\s+`, but its hand-written GPT-2 splitter (`unicode_regex_split_custom_gpt2`) does fall
/// back to `\s+`, as GPT-2 itself does; without it a lone `\n` before a word would match nothing.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|(\s+)";

/// Llama 3's pattern as llama.cpp adapts it (case-insensitive contractions spelled out), with the
/// same `(\s+)` ending.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|(\s+)";

/// Qwen 2's pattern (also Qwen 2.5 and Qwen 3): Llama 3's with every digit on its own.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|(\s+)";

/// One row of the table: the `tokenizer.ggml.pre` names it answers to, and how it splits.
struct Entry {
    names: &'static [&'static str],
    regexes: &'static [&'static str],
    /// A word that is already a whole token skips the merges (llama.cpp `ignore_merges`).
    ignore_merges: bool,
    /// llama.cpp's default for `add_bos` under this pre-tokenizer, before `add_bos_token` is read.
    add_bos: bool,
}

const TABLE: &[Entry] = &[
    // SmolLM, StarCoder, Refact: every digit on its own, then GPT-2.
    Entry {
        names: &["smollm", "starcoder", "refact"],
        regexes: &[r"\p{N}", GPT2],
        ignore_merges: false,
        add_bos: false,
    },
    Entry { names: &["gpt-2", "gpt2"], regexes: &[GPT2], ignore_merges: false, add_bos: false },
    // Llama 3 and Qwen 2: splits equal to Hugging Face `tokenizers` on tests/data/pretokenize.
    Entry { names: &["llama3", "llama-v3", "llama-bpe"], regexes: &[LLAMA3], ignore_merges: true, add_bos: true },
    // Qwen's files carry no BOS (llama.cpp: no `ignore_merges` for this type).
    Entry { names: &["qwen2", "deepseek-r1-qwen"], regexes: &[QWEN2], ignore_merges: false, add_bos: false },
    // llama.cpp's fallback, also used when a GPT-2 style file names no pre-tokenizer.
    Entry {
        names: &["default", ""],
        regexes: &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
        ignore_merges: false,
        add_bos: false,
    },
];

/// A compiled pre-tokenizer.
#[derive(Debug)]
pub struct PreTokenizer {
    name: &'static str,
    regexes: Vec<Regex>,
    ignore_merges: bool,
    add_bos: bool,
}

impl PreTokenizer {
    /// The pre-tokenizer that `tokenizer.ggml.pre` names (`""` when the key is missing).
    pub fn from_name(name: &str) -> Result<PreTokenizer> {
        let Some(entry) = TABLE.iter().find(|e| e.names.contains(&name)) else {
            let known: Vec<&str> =
                TABLE.iter().flat_map(|e| e.names.iter().copied()).filter(|n| !n.is_empty()).collect();
            return Err(Error::Tokenizer(format!(
                "pre-tokenizer `{name}` (tokenizer.ggml.pre) is not supported; known: {}",
                known.join(", ")
            )));
        };
        let regexes = entry
            .regexes
            .iter()
            .map(|r| Regex::new(r).map_err(|e| Error::Tokenizer(format!("pre-tokenizer regex {r:?}: {e}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(PreTokenizer { name: entry.names[0], regexes, ignore_merges: entry.ignore_merges, add_bos: entry.add_bos })
    }

    /// The table name this pre-tokenizer was found under (the row's first name).
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn ignore_merges(&self) -> bool {
        self.ignore_merges
    }

    pub fn default_add_bos(&self) -> bool {
        self.add_bos
    }

    /// Cuts `text` into words; their concatenation is always `text`.
    pub fn split<'t>(&self, text: &'t str) -> Result<Vec<&'t str>> {
        let mut fragments = vec![text];
        for regex in &self.regexes {
            let mut next = Vec::with_capacity(fragments.len() * 2);
            for fragment in fragments {
                split_one(regex, fragment, &mut next)?;
            }
            fragments = next;
        }
        fragments.retain(|f| !f.is_empty());
        Ok(fragments)
    }
}

/// Pushes `fragment`'s matches and the gaps between them, in order.
fn split_one<'t>(regex: &Regex, fragment: &'t str, out: &mut Vec<&'t str>) -> Result<()> {
    let (mut last, mut pos) = (0, 0);
    while pos < fragment.len() {
        // The engine is linear-time here (see the module doc), so this error cannot happen in
        // practice; report it rather than cut text silently.
        let error = |e: fancy_regex::Error| Error::Tokenizer(format!("pre-tokenizer: {e}"));
        let Some(whole) = regex.find_from_pos(fragment, pos).map_err(error)? else { break };
        let mut end = whole.end();
        // `\s+(?!\S)`: a run of two or more whitespace characters followed by a word leaves its
        // last character to that word. Only an all-space match can be that run (group 1), so the
        // slower capture search runs for those alone. Rust's `is_whitespace` is the regex's `\s`.
        let run = whole.as_str();
        if end < fragment.len()
            && run.chars().nth(1).is_some()
            && run.chars().all(char::is_whitespace)
            && let Some(c) = run.chars().next_back()
            && regex.captures_from_pos(fragment, pos).map_err(error)?.is_some_and(|caps| caps.get(1).is_some())
        {
            end -= c.len_utf8();
        }
        if whole.start() > last {
            out.push(&fragment[last..whole.start()]);
        }
        if end > whole.start() {
            out.push(&fragment[whole.start()..end]);
            pos = end;
        } else {
            // An empty match (no built-in pattern has one): step over one character.
            pos = end + fragment[end..].chars().next().map_or(1, char::len_utf8);
        }
        last = end;
    }
    if last < fragment.len() {
        out.push(&fragment[last..]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pre: &str, text: &str) -> Vec<String> {
        let pre = PreTokenizer::from_name(pre).unwrap();
        let words = pre.split(text).unwrap();
        assert_eq!(words.concat(), text, "split must keep every byte");
        words.into_iter().map(String::from).collect()
    }

    #[test]
    fn whitespace_before_a_word_keeps_its_last_space_for_the_word() {
        assert_eq!(split("gpt-2", "a   b"), ["a", "  ", " b"]);
        assert_eq!(split("gpt-2", "   leading"), ["  ", " leading"]);
        assert_eq!(split("gpt-2", "trailing   "), ["trailing", "   "]);
        assert_eq!(split("gpt-2", "x\n\ny"), ["x", "\n", "\n", "y"]);
        assert_eq!(split("gpt-2", "a\tb"), ["a", "\t", "b"]);
        assert_eq!(split("gpt-2", "a \tb"), ["a", " ", "\t", "b"]);
        assert_eq!(split("gpt-2", "a \n"), ["a", " \n"]);
    }

    #[test]
    fn smollm_splits_every_digit() {
        assert_eq!(split("smollm", "1234567"), ["1", "2", "3", "4", "5", "6", "7"]);
        assert_eq!(split("smollm", "x 42"), ["x", " ", "4", "2"]);
        // The digit cut ends the fragment, so the space run is not split by (?!\S).
        assert_eq!(split("smollm", "a  1"), ["a", "  ", "1"]);
        assert_eq!(split("smollm", "v2.0"), ["v", "2", ".", "0"]);
        // \p{N} is any number, not only ASCII digits.
        assert_eq!(split("smollm", "x½٣"), ["x", "½", "٣"]);
    }

    #[test]
    fn contractions_and_punctuation() {
        assert_eq!(split("gpt-2", "don't we've"), ["don", "'t", " we", "'ve"]);
        assert_eq!(split("gpt-2", "I'M"), ["I", "'", "M"]);
        // The punctuation run takes both quotes, as llama.cpp's splitter does.
        assert_eq!(split("gpt-2", "''s"), ["''", "s"]);
        assert_eq!(split("gpt-2", "x'sy"), ["x", "'s", "y"]);
        assert_eq!(split("gpt-2", "hi!!! ?"), ["hi", "!!!", " ?"]);
    }

    #[test]
    fn unicode_letters_and_symbols() {
        assert_eq!(split("gpt-2", "café naïve"), ["café", " naïve"]);
        assert_eq!(split("gpt-2", " 日本語です。"), [" 日本語です", "。"]);
        assert_eq!(split("gpt-2", "a 😀🚀 b"), ["a", " 😀🚀", " b"]);
        assert_eq!(split("gpt-2", ""), Vec::<String>::new());
    }

    #[test]
    fn every_table_entry_compiles_and_keeps_every_byte() {
        let text = "Hello  world's 12345 +x\n\n\t é日本 😀!? ";
        for name in TABLE.iter().flat_map(|e| e.names.iter()) {
            split(name, text);
        }
        // Each regex runs on the previous one's fragments: punctuation, GPT-2, numbers, triples.
        assert_eq!(split("default", "a+b 1234"), ["a", "+", "b", " ", "123", "4"]);
        // Llama 3: numbers in groups of up to three, a space never joins a number.
        assert_eq!(split("llama3", "Hello world 12345"), ["Hello", " world", " ", "123", "45"]);
        assert_eq!(split("llama3", "x\n\n  y"), ["x", "\n\n", " ", " y"]);
    }

    #[test]
    fn unknown_name_is_an_error_naming_it() {
        let err = PreTokenizer::from_name("no-such-split").unwrap_err().to_string();
        assert!(err.contains("no-such-split") && err.contains("smollm"), "{err}");
    }
}
