//! SentencePiece vocabularies (`tokenizer.ggml.model = "llama"`): Llama 2, Gemma, Mistral v0.1.
//!
//! The vocabulary carries a score per token and no merge list. A text fragment has its spaces
//! written as `▁` (U+2581), starts as one symbol per character, and the adjacent pair whose
//! concatenation is a token with the highest score is merged (the leftmost on a tie) until no
//! pair forms a token. That is SentencePiece's BPE encoder and llama.cpp's
//! `llm_tokenizer_spm_session`. A symbol that is not a token at the end (a character the
//! vocabulary lacks) becomes one `<0xNN>` token per UTF-8 byte (byte fallback).
//!
//! llama.cpp keeps a `rev_merge` table to split such a symbol back into the pairs that made it;
//! it is never used, because a pair is only merged when the merged text is a token, so every
//! multi-character symbol is a token and only single characters fall back to bytes.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::TokenType;
use crate::error::{Error, Result};

/// SentencePiece's meta symbol for a space.
pub const SPACE: char = '\u{2581}';

/// What an SPM vocabulary adds to the token list.
#[derive(Debug)]
pub struct Spm {
    scores: Vec<f32>,
    /// The token of each byte for byte fallback: `<0xNN>`, else the one-byte token (ASCII), else
    /// the unknown token, else none (`u32::MAX`: the byte is dropped; llama.cpp would throw).
    byte_tokens: Box<[u32; 256]>,
}

/// A candidate merge of the symbols starting at `left` and `right`.
#[derive(Debug, PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    /// Bytes of the merged text: a stale entry (one side merged since) no longer adds up.
    size: usize,
}

impl Eq for Bigram {}

impl Ord for Bigram {
    /// The heap's top is the highest score, then the leftmost (llama.cpp `llm_bigram_spm`).
    /// `total_cmp` keeps a NaN score (a hostile file) from breaking the heap's order.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The hex value of a byte token's text, `<0xNN>`.
pub fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    // from_str_radix alone would also take a sign (`<0x+1>`).
    if hex.len() != 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

impl Spm {
    /// Checks the scores and byte tokens against the vocabulary.
    pub fn new(
        tokens: &[String],
        types: &[TokenType],
        scores: Vec<f32>,
        token_to_id: &HashMap<String, u32>,
        unk: Option<u32>,
    ) -> Result<Spm> {
        if scores.len() != tokens.len() {
            return Err(Error::Tokenizer(format!(
                "tokenizer.ggml.scores has {} entries for {} tokens",
                scores.len(),
                tokens.len()
            )));
        }
        for (id, (text, ty)) in tokens.iter().zip(types).enumerate() {
            if *ty == TokenType::Byte && parse_byte_token(text).is_none() {
                return Err(Error::Tokenizer(format!("token {id} has type BYTE but its text {text:?} is not <0xNN>")));
            }
        }
        let mut byte_tokens = Box::new([u32::MAX; 256]);
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            let hex = format!("<0x{b:02X}>");
            let plain = if b < 0x80 { Some((b as u8 as char).to_string()) } else { None };
            *slot = token_to_id
                .get(&hex)
                .or_else(|| plain.and_then(|p| token_to_id.get(&p)))
                .copied()
                .or(unk)
                .unwrap_or(u32::MAX);
        }
        Ok(Spm { scores, byte_tokens })
    }

    pub fn score(&self, id: u32) -> Option<f32> {
        self.scores.get(id as usize).copied()
    }

    /// Encodes one fragment whose spaces are already `▁`, appending its ids to `out`.
    pub fn encode(&self, text: &str, token_to_id: &HashMap<String, u32>, out: &mut Vec<u32>) {
        // Symbols as byte ranges of `text`: symbol i covers start[i]..start[i] + len[i]; merged
        // symbols have len 0. Neighbours are linked by index (`usize::MAX` = none).
        let mut start: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        let n = start.len();
        if n == 0 {
            return;
        }
        start.push(text.len());
        let mut len: Vec<usize> = start.windows(2).map(|w| w[1] - w[0]).collect();
        start.pop();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut next: Vec<usize> = (1..=n).map(|i| if i == n { usize::MAX } else { i }).collect();

        let mut queue = BinaryHeap::with_capacity(n);
        let try_add = |queue: &mut BinaryHeap<Bigram>, start: &[usize], len: &[usize], left: usize, right: usize| {
            if left == usize::MAX || right == usize::MAX {
                return;
            }
            let size = len[left] + len[right];
            if let Some(&id) = token_to_id.get(&text[start[left]..start[left] + size]) {
                queue.push(Bigram { score: self.scores[id as usize], left, right, size });
            }
        };
        for i in 1..n {
            try_add(&mut queue, &start, &len, i - 1, i);
        }
        while let Some(bigram) = queue.pop() {
            let (left, right) = (bigram.left, bigram.right);
            if len[left] == 0 || len[right] == 0 || len[left] + len[right] != bigram.size {
                continue;
            }
            len[left] += len[right];
            len[right] = 0;
            next[left] = next[right];
            if next[right] != usize::MAX {
                prev[next[right]] = left;
            }
            try_add(&mut queue, &start, &len, prev[left], left);
            try_add(&mut queue, &start, &len, left, next[left]);
        }

        let mut i = 0;
        while i != usize::MAX {
            let piece = &text[start[i]..start[i] + len[i]];
            match token_to_id.get(piece) {
                Some(&id) => out.push(id),
                None => out.extend(piece.bytes().map(|b| self.byte_tokens[b as usize]).filter(|&id| id != u32::MAX)),
            }
            i = next[i];
        }
    }
}

/// `text` with every space written as `▁` (llama.cpp `llama_escape_whitespace`).
pub fn escape_spaces(text: &str) -> String {
    text.replace(' ', "\u{2581}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spm(vocab: &[(&str, f32)]) -> (Spm, HashMap<String, u32>) {
        let tokens: Vec<String> = vocab.iter().map(|(t, _)| t.to_string()).collect();
        let types: Vec<TokenType> = tokens
            .iter()
            .map(|t| if parse_byte_token(t).is_some() { TokenType::Byte } else { TokenType::Normal })
            .collect();
        let ids: HashMap<String, u32> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let scores = vocab.iter().map(|(_, s)| *s).collect();
        (Spm::new(&tokens, &types, scores, &ids, None).unwrap(), ids)
    }

    fn run(vocab: &[(&str, f32)], text: &str) -> Vec<u32> {
        let (spm, ids) = spm(vocab);
        let mut out = Vec::new();
        spm.encode(text, &ids, &mut out);
        out
    }

    #[test]
    fn highest_score_first_then_leftmost() {
        // "bc" outscores "ab": abc → a + bc; with "ab" better, ab + c.
        let vocab = [("a", -1.0), ("b", -1.0), ("c", -1.0), ("ab", -3.0), ("bc", -2.0)];
        assert_eq!(run(&vocab, "abc"), [0, 4]);
        let vocab = [("a", -1.0), ("b", -1.0), ("c", -1.0), ("ab", -2.0), ("bc", -3.0)];
        assert_eq!(run(&vocab, "abc"), [3, 2]);
        // Merging goes on while a pair forms a token, whatever its score: ab + c → abc.
        let vocab = [("a", -1.0), ("b", -1.0), ("c", -1.0), ("ab", -2.0), ("bc", -3.0), ("abc", -9.0)];
        assert_eq!(run(&vocab, "abc"), [5]);
        // Equal scores: the leftmost pair merges first: aaa → aa a.
        assert_eq!(run(&[("a", -1.0), ("aa", -2.0)], "aaa"), [1, 0]);
        assert_eq!(run(&[("a", -1.0)], ""), Vec::<u32>::new());
    }

    #[test]
    fn unknown_characters_fall_back_to_bytes() {
        let vocab = [("<0xC3>", 0.0), ("<0xA9>", 0.0), ("x", -1.0), ("<0x41>", 0.0)];
        // é is C3 A9; "A" has only its byte token; "z" has nothing and is dropped.
        assert_eq!(run(&vocab, "xéAz"), [2, 0, 1, 3]);
        let tokens = vec!["<0xZZ>".to_string()];
        let ids = HashMap::from([(tokens[0].clone(), 0)]);
        let err = Spm::new(&tokens, &[TokenType::Byte], vec![0.0], &ids, None).unwrap_err();
        assert!(err.to_string().contains("<0xNN>"), "{err}");
        let err = Spm::new(&tokens, &[TokenType::Normal], vec![], &ids, None).unwrap_err();
        assert!(err.to_string().contains("scores"), "{err}");
    }

    #[test]
    fn byte_token_texts() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(10));
        assert_eq!(parse_byte_token("<0xff>"), Some(255));
        assert_eq!(parse_byte_token("<0x1>"), None);
        assert_eq!(parse_byte_token("<0x+1>"), None);
        assert_eq!(escape_spaces(" a b "), "▁a▁b▁");
    }
}
