//! The tokenizer, built from a GGUF's `tokenizer.*` metadata alone (no tokenizer.json).
//!
//! Two vocabulary kinds, as llama.cpp names them in `tokenizer.ggml.model`:
//! - `gpt2`: byte-level BPE, with the pre-tokenizer named by `tokenizer.ggml.pre` (see
//!   `pretokenize.rs` for the table): the text is split into words by regex, and each word's
//!   bytes are merged by rank (`bpe.rs`);
//! - `llama`: SentencePiece (`spm.rs`): spaces written as `▁`, pieces merged by score, characters
//!   the vocabulary lacks as `<0xNN>` byte tokens, and a leading `▁` where
//!   `tokenizer.ggml.add_space_prefix` says so (at the start and after every special token).
//!
//! The target is llama.cpp's behaviour, id for id: `encode(text, parse_special)` is
//! `llama_tokenize(add_special=false, parse_special)` and `token_bytes` is
//! `llama_token_to_piece(special=true)`. In both kinds, special tokens written in the text are cut
//! out first (`special.rs`). Decoding maps each token back to its bytes (`bytes.rs` for BPE);
//! `stream.rs` turns a stream of ids into whole UTF-8 characters, and `chat.rs` renders the
//! model's chat template.

mod bpe;
pub mod bytes;
mod chat;
mod pretokenize;
mod special;
mod spm;
mod stream;
mod vocab;

use std::collections::HashMap;
use std::fmt;

use crate::error::{Error, Result};
use crate::gguf::Gguf;

use bpe::{Merges, NO_TOKEN};
use special::{Fragment, SpecialTokens};
use spm::Spm;

pub use chat::{ChatMessage, render_chat_template};
pub use pretokenize::PreTokenizer;
pub use stream::StreamDecoder;
pub use vocab::SpecialIds;

/// A token's type, from `tokenizer.ggml.token_type` (llama.cpp `llama_token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    /// 0, or any code this reader does not know.
    Undefined,
    Normal,
    Unknown,
    /// Markup such as `<|im_start|>`: matched in text only with `parse_special`.
    Control,
    /// Added tokens matched in text even without `parse_special`.
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    pub fn from_gguf(code: i64) -> TokenType {
        match code {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

/// The vocabulary's kind (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerKind {
    /// `gpt2`: byte-level BPE.
    Bpe,
    /// `llama`: SentencePiece.
    SentencePiece,
}

/// How a fragment of plain text becomes ids.
enum Model {
    Bpe {
        /// The token of each single byte (`NO_TOKEN` if the vocabulary lacks it).
        byte_tokens: Box<[u32; 256]>,
        merges: Merges,
        pre: PreTokenizer,
    },
    Spm {
        spm: Spm,
        add_space_prefix: bool,
    },
}

/// A GGUF vocabulary's tokenizer. Cheap to share across threads (`Send + Sync`, immutable).
pub struct Tokenizer {
    tokens: Vec<String>,
    types: Vec<TokenType>,
    token_to_id: HashMap<String, u32>,
    /// Every token's decoded bytes, concatenated; token `i` is `pieces[offsets[i]..offsets[i + 1]]`.
    pieces: Vec<u8>,
    offsets: Vec<usize>,
    model: Model,
    specials: SpecialTokens,
    ids: SpecialIds,
    eog: Vec<u32>,
    add_bos: bool,
    add_eos: bool,
    chat_template: Option<String>,
}

impl Tokenizer {
    /// Builds the tokenizer from the file's metadata.
    pub fn from_gguf(gguf: &Gguf) -> Result<Tokenizer> {
        let kind = match gguf.get("tokenizer.ggml.model").and_then(|v| v.as_str()) {
            Some("gpt2") => TokenizerKind::Bpe,
            Some("llama") => TokenizerKind::SentencePiece,
            Some(other) => {
                return Err(Error::Tokenizer(format!(
                    "tokenizer model `{other}` (tokenizer.ggml.model) is not supported; `gpt2` \
                     (byte-level BPE) and `llama` (SentencePiece) are"
                )));
            }
            None => return Err(Error::Tokenizer("the GGUF has no tokenizer.ggml.model string".into())),
        };
        let (tokens, mut types) = vocab::read_tokens(gguf)?;
        // On a duplicate string the last id wins, as in llama.cpp's `token_to_id[text] = id`.
        let token_to_id: HashMap<String, u32> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let spm_defaults = kind == TokenizerKind::SentencePiece;
        let (ids, eog) = vocab::special_ids(gguf, &tokens, &token_to_id, &mut types, spm_defaults);
        let flag = |key: &str| gguf.get(key).and_then(|v| v.as_bool());
        let (model, default_add_bos) = match kind {
            TokenizerKind::Bpe => {
                // llama.cpp uses its default split, with a warning, when the key is missing.
                let pre = gguf.get("tokenizer.ggml.pre").and_then(|v| v.as_str()).unwrap_or("");
                let pre = PreTokenizer::from_name(pre)?;
                let merges = vocab::array(gguf, "tokenizer.ggml.merges")?
                    .ok_or_else(|| Error::Tokenizer("a gpt2 tokenizer needs tokenizer.ggml.merges".into()))?;
                let merges = Merges::from_gguf(merges, &token_to_id)?;
                let mut byte_tokens = Box::new([NO_TOKEN; 256]);
                for (b, slot) in byte_tokens.iter_mut().enumerate() {
                    let text = bytes::byte_to_char(b as u8).to_string();
                    *slot = token_to_id.get(&text).copied().unwrap_or(NO_TOKEN);
                }
                let add_bos = pre.default_add_bos();
                (Model::Bpe { byte_tokens, merges, pre }, add_bos)
            }
            TokenizerKind::SentencePiece => {
                let scores = vocab::scores(gguf, tokens.len())?;
                let spm = Spm::new(&tokens, &types, scores, &token_to_id, ids.unk)?;
                // llama.cpp's defaults for SentencePiece: a leading space, and BOS.
                let add_space_prefix = flag("tokenizer.ggml.add_space_prefix").unwrap_or(true);
                (Model::Spm { spm, add_space_prefix }, true)
            }
        };

        let (pieces, offsets) = vocab::pieces(kind, &tokens, &types);
        Ok(Tokenizer {
            specials: SpecialTokens::new(&tokens, &types),
            add_bos: flag("tokenizer.ggml.add_bos_token").unwrap_or(default_add_bos),
            add_eos: flag("tokenizer.ggml.add_eos_token").unwrap_or(false),
            chat_template: gguf.get("tokenizer.chat_template").and_then(|v| v.as_str()).map(String::from),
            tokens,
            types,
            token_to_id,
            pieces,
            offsets,
            model,
            ids,
            eog,
        })
    }

    /// Text → ids, nothing added (llama.cpp `llama_tokenize` with `add_special = false`). With
    /// `parse_special`, control tokens written in the text (`<|im_start|>`) become their ids;
    /// without it they are tokenized as plain text. User-defined tokens are matched either way.
    /// An empty text gives no ids. Never panics on any text; the `Result` is for a regex engine
    /// failure, which the built-in (look-around free, linear-time) patterns cannot produce.
    pub fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        let fragments = self.specials.partition(text, parse_special);
        match &self.model {
            Model::Bpe { byte_tokens, merges, pre } => {
                let mut word = Vec::new();
                for fragment in fragments {
                    let raw = match fragment {
                        Fragment::Token(id) => {
                            out.push(id);
                            continue;
                        }
                        Fragment::Text(raw) => raw,
                    };
                    for piece in pre.split(raw)? {
                        if pre.ignore_merges()
                            && let Some(&id) = self.token_to_id.get(&bytes::encode(piece.as_bytes()))
                        {
                            out.push(id);
                            continue;
                        }
                        word.clear();
                        word.extend(piece.bytes().map(|b| byte_tokens[b as usize]));
                        merges.apply(&mut word);
                        out.extend(word.iter().copied().filter(|&id| id != NO_TOKEN));
                    }
                }
            }
            Model::Spm { spm, add_space_prefix } => {
                // llama.cpp's `is_prev_special`: the text start counts as following a special token.
                let mut after_special = true;
                let mut escaped = String::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Token(id) => {
                            out.push(id);
                            after_special = true;
                        }
                        // Only an empty input gives an empty fragment; it has no tokens.
                        Fragment::Text("") => {}
                        Fragment::Text(raw) => {
                            escaped.clear();
                            if *add_space_prefix && after_special {
                                escaped.push(spm::SPACE);
                            }
                            escaped.push_str(&spm::escape_spaces(raw));
                            spm.encode(&escaped, &self.token_to_id, &mut out);
                            after_special = false;
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Text → ids as a model expects its whole input (llama.cpp `add_special = true`): BOS first
    /// if the file's `add_bos_token` is true and EOS last if `add_eos_token` is, when the model
    /// has those tokens. SmolLM2 sets neither, so this equals [`encode`](Self::encode) there;
    /// Gemma 3 adds BOS.
    pub fn encode_with_specials(&self, text: &str, parse_special: bool) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        out.extend(self.ids.bos.filter(|_| self.add_bos));
        out.extend(self.encode(text, parse_special)?);
        out.extend(self.ids.eos.filter(|_| self.add_eos));
        Ok(out)
    }

    /// Ids → bytes, concatenating [`token_bytes`](Self::token_bytes). Lossless: decoding
    /// `encode(text)` gives `text` back byte for byte, except that a SentencePiece vocabulary with
    /// `add_space_prefix` gives back the leading space it added (at the start and after each
    /// special token), as llama.cpp's `token_to_piece` does, and that a `▁` written in the text
    /// comes back as a space (SentencePiece writes spaces as `▁`, so the two are one token). Control tokens render as their text
    /// (like llama.cpp with `special = true`); ids outside the vocabulary render as nothing.
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            out.extend_from_slice(self.token_bytes(id));
        }
        out
    }

    /// [`decode`](Self::decode), with invalid UTF-8 replaced by U+FFFD.
    pub fn decode_lossy(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.decode(ids)).into_owned()
    }

    /// The bytes token `id` stands for (its piece); may be part of a UTF-8 character (a
    /// SentencePiece `<0xNN>` token is one byte). Empty for ids outside the vocabulary and for
    /// tokens llama.cpp renders as nothing (unused ones; in BPE also unknown and byte tokens).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let id = id as usize;
        match (self.offsets.get(id), self.offsets.get(id + 1)) {
            (Some(&start), Some(&end)) => &self.pieces[start..end],
            _ => &[],
        }
    }

    /// A decoder for generated tokens that yields only whole characters.
    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The id of a token by its vocabulary string (BPE: GPT-2 form, `"Ġthe"` for `" the"`;
    /// SentencePiece: `"▁the"`).
    pub fn id_of(&self, token: &str) -> Option<u32> {
        self.token_to_id.get(token).copied()
    }

    /// A token's vocabulary string, as stored in the file.
    pub fn token_str(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    pub fn special_ids(&self) -> SpecialIds {
        self.ids
    }

    /// End-of-generation ids, ascending: eos, eot, eom, the `tokenizer.ggml.fim_{pad,rep,sep}`
    /// ids, and, as llama.cpp does, every token whose text is `<|endoftext|>`, `<|im_end|>`,
    /// `<|eot_id|>`, `<|eom_id|>`, `<|end|>`, `<end_of_turn>` or `<EOT>`. SmolLM2: `[0, 2]`.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// The file's `tokenizer.ggml.add_bos_token` (else the pre-tokenizer's default for BPE, true
    /// for SentencePiece, as llama.cpp).
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    pub fn kind(&self) -> TokenizerKind {
        match self.model {
            Model::Bpe { .. } => TokenizerKind::Bpe,
            Model::Spm { .. } => TokenizerKind::SentencePiece,
        }
    }

    /// The BPE pre-tokenizer (`None` for SentencePiece, which has none).
    pub fn pre_tokenizer(&self) -> Option<&PreTokenizer> {
        match &self.model {
            Model::Bpe { pre, .. } => Some(pre),
            Model::Spm { .. } => None,
        }
    }

    /// A SentencePiece token's score (`tokenizer.ggml.scores`); `None` for BPE.
    pub fn score(&self, id: u32) -> Option<f32> {
        match &self.model {
            Model::Spm { spm, .. } => spm.score(id),
            Model::Bpe { .. } => None,
        }
    }

    /// SentencePiece's `add_space_prefix` (default true); always false for BPE.
    pub fn add_space_prefix(&self) -> bool {
        matches!(self.model, Model::Spm { add_space_prefix: true, .. })
    }

    /// The model's Jinja chat template (`tokenizer.chat_template`), if it has one.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// The number of usable merges (those whose parts and result are all tokens); 0 for
    /// SentencePiece. `ultra info` shows it.
    pub fn n_merges(&self) -> usize {
        match &self.model {
            Model::Bpe { merges, .. } => merges.len(),
            Model::Spm { .. } => 0,
        }
    }
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.tokens.len())
            .field("kind", &self.kind())
            .field("merges", &self.n_merges())
            .field("pre", &self.pre_tokenizer().map(PreTokenizer::name))
            .field("special_ids", &self.ids)
            .field("eog", &self.eog)
            .field("add_bos", &self.add_bos)
            .finish()
    }
}
