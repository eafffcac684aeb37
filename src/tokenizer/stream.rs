//! Streaming detokenization. One token can end in the middle of a UTF-8 character (emoji and CJK
//! often take two or three byte-level tokens), so printing each token's bytes as they come would
//! show broken characters. `StreamDecoder` holds back an incomplete character until the bytes that
//! finish it arrive, and only ever returns whole characters.

use super::Tokenizer;

/// Turns token ids, fed one at a time, into text. Get one from [`Tokenizer::stream_decoder`].
///
/// Bytes that can never become valid UTF-8 (an invalid sequence, not merely an unfinished one)
/// come out as U+FFFD as soon as they are seen. An unfinished character still held at the end comes
/// out of [`flush`](Self::flush) as U+FFFD as well. So the concatenated output is always
/// `String::from_utf8_lossy` of [`Tokenizer::decode`] of the same ids; use `decode` when the raw
/// bytes themselves are wanted.
#[derive(Debug)]
pub struct StreamDecoder<'t> {
    tokenizer: &'t Tokenizer,
    /// Bytes of an unfinished character (at most 3).
    pending: Vec<u8>,
}

impl<'t> StreamDecoder<'t> {
    pub(super) fn new(tokenizer: &'t Tokenizer) -> StreamDecoder<'t> {
        StreamDecoder { tokenizer, pending: Vec::new() }
    }

    /// Adds one token; returns the text it completes (possibly empty).
    pub fn push(&mut self, id: u32) -> String {
        self.pending.extend_from_slice(self.tokenizer.token_bytes(id));
        let mut out = String::new();
        let mut start = 0;
        while start < self.pending.len() {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(text) => {
                    out.push_str(text);
                    start = self.pending.len();
                }
                Err(err) => {
                    let valid = start + err.valid_up_to();
                    // The prefix up to `valid` is UTF-8, so the lossy conversion copies it as is.
                    out.push_str(&String::from_utf8_lossy(&self.pending[start..valid]));
                    match err.error_len() {
                        // Invalid whatever follows: replace it now, never wait on it.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start = valid + bad;
                        }
                        // Unfinished character at the end: keep it for the next token.
                        None => {
                            start = valid;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        out
    }

    /// Ends the stream: returns what is still held (U+FFFD for an unfinished character).
    pub fn flush(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }

    /// The bytes held back, waiting for the rest of their character.
    pub fn pending_bytes(&self) -> &[u8] {
        &self.pending
    }
}
