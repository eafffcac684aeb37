//! A request's text as its tokens arrive: token bytes in, text out, never half a UTF-8 character
//! and never any part of a stop string. Bytes that could still begin a stop string are held back
//! until the next token settles them, so a stop string split across tokens is matched, and
//! nothing of it (nor anything after it) is ever released.

use std::sync::Arc;

use crate::error::{Error, Result};

/// Most stop strings per request (OpenAI's limit).
pub const MAX_STOPS: usize = 4;

/// Each token id's bytes, as the tokenizer decodes it alone; ids without text (end-of-generation
/// tokens) map to no bytes.
pub type TokenPieces = Arc<Vec<Vec<u8>>>;

/// Detokenizes one request's tokens and watches for its stop strings.
#[derive(Clone, Debug)]
pub struct TextStream {
    pieces: TokenPieces,
    stops: Vec<Vec<u8>>,
    /// Bytes decoded but not yet released: a partial character or a possible stop-string start.
    pending: Vec<u8>,
    /// Everything released so far.
    text: String,
    stopped: bool,
}

/// What one token changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextStep {
    /// Text released by this token (often empty while bytes are held back).
    pub delta: String,
    /// A stop string matched: the text ends before it and the request is done.
    pub stopped: bool,
}

impl TextStream {
    /// A stream over `pieces` that ends at the first of `stops` (at most `MAX_STOPS`, none empty).
    pub fn new(pieces: TokenPieces, stops: &[String]) -> Result<TextStream> {
        if stops.len() > MAX_STOPS {
            return Err(Error::InvalidArgument(format!("at most {MAX_STOPS} stop strings, got {}", stops.len())));
        }
        if stops.iter().any(String::is_empty) {
            return Err(Error::InvalidArgument("stop strings must not be empty".into()));
        }
        let stops = stops.iter().map(|s| s.as_bytes().to_vec()).collect();
        Ok(TextStream { pieces, stops, pending: Vec::new(), text: String::new(), stopped: false })
    }

    /// Everything released so far (the whole text once `finish` has run).
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Adds one token's bytes; ids outside the table add nothing. After a stop, adds nothing.
    pub fn push(&mut self, token: u32) -> TextStep {
        if self.stopped {
            return TextStep { delta: String::new(), stopped: true };
        }
        if let Some(piece) = self.pieces.get(token as usize) {
            self.pending.extend_from_slice(piece);
        }
        if let Some(at) = self.first_stop() {
            self.pending.truncate(at);
            self.stopped = true;
            let delta = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
            self.text.push_str(&delta);
            return TextStep { delta, stopped: true };
        }
        let keep = self.held_suffix();
        let delta = self.release(self.pending.len() - keep);
        TextStep { delta, stopped: false }
    }

    /// The request ended: releases what was held back (a trailing partial character as U+FFFD).
    pub fn finish(&mut self) -> String {
        let delta = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
        self.text.push_str(&delta);
        delta
    }

    /// Byte offset in `pending` of the earliest stop-string match.
    fn first_stop(&self) -> Option<usize> {
        self.stops.iter().filter_map(|s| find(&self.pending, s)).min()
    }

    /// Length of the longest suffix of `pending` that is a proper prefix of some stop string.
    fn held_suffix(&self) -> usize {
        let p = &self.pending;
        let mut keep = 0;
        for s in &self.stops {
            for n in (keep + 1..s.len().min(p.len() + 1)).rev() {
                if p[p.len() - n..] == s[..n] {
                    keep = n;
                    break;
                }
            }
        }
        keep
    }

    /// Releases up to `n` leading pending bytes, stopping before an incomplete character;
    /// invalid bytes become U+FFFD.
    fn release(&mut self, n: usize) -> String {
        let mut out = String::new();
        let mut start = 0;
        while start < n {
            match std::str::from_utf8(&self.pending[start..n]) {
                Ok(s) => {
                    out.push_str(s);
                    start = n;
                }
                Err(e) => {
                    let valid = start + e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[start..valid]).expect("checked valid"));
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start = valid + bad;
                        }
                        None => {
                            start = valid; // an incomplete character: wait for its next bytes
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        self.text.push_str(&out);
        out
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens 0..n are the given pieces.
    fn stream(pieces: &[&[u8]], stops: &[&str]) -> TextStream {
        let pieces = Arc::new(pieces.iter().map(|p| p.to_vec()).collect());
        TextStream::new(pieces, &stops.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn run(s: &mut TextStream, tokens: &[u32]) -> Vec<TextStep> {
        tokens.iter().map(|&t| s.push(t)).collect()
    }

    #[test]
    fn plain_text_is_released_as_it_comes() {
        let mut s = stream(&[b"Hel", b"lo", b" world"], &[]);
        let deltas: Vec<String> = run(&mut s, &[0, 1, 2]).into_iter().map(|d| d.delta).collect();
        assert_eq!(deltas, ["Hel", "lo", " world"]);
        assert_eq!(s.finish(), "");
        assert_eq!(s.text(), "Hello world");
    }

    #[test]
    fn a_character_split_across_tokens_waits_for_its_last_byte() {
        let e = "é".as_bytes();
        let mut s = stream(&[&e[..1], &e[1..], b"!"], &[]);
        let steps = run(&mut s, &[0, 1, 2]);
        assert_eq!(steps[0].delta, "");
        assert_eq!(steps[1].delta, "é");
        assert_eq!(steps[2].delta, "!");
    }

    #[test]
    fn a_stop_string_across_tokens_is_matched_and_never_emitted() {
        let mut s = stream(&[b"one ", b"tw", b"o thr", b"ee"], &["two three"]);
        let steps = run(&mut s, &[0, 1, 2, 3]);
        assert_eq!(steps[0], TextStep { delta: "one ".into(), stopped: false });
        assert_eq!(steps[1].delta, "", "`tw` may begin the stop string");
        assert_eq!(steps[2].delta, "");
        assert_eq!(steps[3], TextStep { delta: "".into(), stopped: true });
        assert_eq!(s.text(), "one ");
        assert_eq!(s.push(0), TextStep { delta: "".into(), stopped: true }, "nothing after a stop");
    }

    #[test]
    fn held_bytes_that_do_not_complete_a_stop_are_released() {
        let mut s = stream(&[b"a\n", b"b", b"\n\n"], &["\n\n"]);
        let steps = run(&mut s, &[0, 1]);
        assert_eq!(steps[0].delta, "a");
        assert_eq!(steps[1].delta, "\nb");
        let last = s.push(2);
        assert!(last.stopped);
        assert_eq!(s.text(), "a\nb");
    }

    #[test]
    fn text_inside_one_token_before_the_stop_is_kept() {
        let mut s = stream(&[b"x, END y"], &["END", "y"]);
        assert_eq!(s.push(0), TextStep { delta: "x, ".into(), stopped: true });
    }

    #[test]
    fn the_earliest_of_several_stops_wins() {
        let mut s = stream(&[b"abcdef"], &["de", "bc"]);
        assert_eq!(s.push(0).delta, "a");
    }

    #[test]
    fn finish_releases_held_prefixes_and_partial_characters() {
        let mut s = stream(&[b"ok S", &[0xE2, 0x82]], &["STOP"]);
        assert_eq!(s.push(0).delta, "ok ");
        assert_eq!(s.push(1).delta, "S", "`S` is no stop prefix once followed; the partial character waits");
        assert_eq!(s.finish(), "\u{FFFD}");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut s = stream(&[&[b'a', 0xFF, b'b']], &[]);
        assert_eq!(s.push(0).delta, "a\u{FFFD}b");
    }

    #[test]
    fn bad_stop_lists_are_errors() {
        let pieces: TokenPieces = Arc::new(vec![]);
        assert!(TextStream::new(pieces.clone(), &["".into()]).is_err());
        assert!(TextStream::new(pieces, &vec!["a".to_string(); 5]).is_err());
    }
}
