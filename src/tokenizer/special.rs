//! Special-token matching: before any regex or merge, the text is cut around the written forms
//! of control, user-defined and unknown tokens (llama.cpp `tokenizer_st_partition`).
//!
//! llama.cpp's order is: tokens by decreasing text length, and for each token every occurrence,
//! left to right, in every fragment that is still raw text. So a longer token always wins over a
//! shorter one it overlaps, wherever they sit. Without `parse_special`, control and unknown tokens
//! are left as text, but user-defined tokens are still split out (as HF `tokenizers` does).

use super::TokenType;

/// A piece of the input: raw text for the pre-tokenizer, or a token already decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fragment<'t> {
    Text(&'t str),
    Token(u32),
}

/// The tokens that can be written in text, longest first.
#[derive(Debug, Default)]
pub struct SpecialTokens {
    tokens: Vec<(u32, String, TokenType)>,
}

impl SpecialTokens {
    /// Collects control, user-defined and unknown tokens from the vocabulary.
    pub fn new(tokens: &[String], types: &[TokenType]) -> SpecialTokens {
        let mut list: Vec<(u32, String, TokenType)> = tokens
            .iter()
            .zip(types)
            .enumerate()
            .filter(|(_, (text, ty))| {
                !text.is_empty() && matches!(ty, TokenType::Control | TokenType::UserDefined | TokenType::Unknown)
            })
            .map(|(id, (text, &ty))| (id as u32, text.clone(), ty))
            .collect();
        // Longest first; equal lengths by id, so the order does not depend on a sort's stability.
        list.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        SpecialTokens { tokens: list }
    }

    /// Cuts `text` into raw fragments and special tokens.
    pub fn partition<'t>(&self, text: &'t str, parse_special: bool) -> Vec<Fragment<'t>> {
        let mut fragments = vec![Fragment::Text(text)];
        for (id, token, ty) in &self.tokens {
            if !parse_special && *ty != TokenType::UserDefined {
                continue;
            }
            // Cheap skip for the common case: most special tokens do not occur at all.
            if !text.contains(token.as_str()) {
                continue;
            }
            let mut next = Vec::with_capacity(fragments.len() + 2);
            for fragment in fragments {
                let Fragment::Text(raw) = fragment else {
                    next.push(fragment);
                    continue;
                };
                let mut last = 0;
                for (start, _) in raw.match_indices(token.as_str()) {
                    if start > last {
                        next.push(Fragment::Text(&raw[last..start]));
                    }
                    next.push(Fragment::Token(*id));
                    last = start + token.len();
                }
                if last < raw.len() {
                    next.push(Fragment::Text(&raw[last..]));
                }
            }
            fragments = next;
        }
        fragments
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Fragment::{Text, Token};

    fn specials(list: &[(&str, TokenType)]) -> SpecialTokens {
        let tokens: Vec<String> = list.iter().map(|(t, _)| t.to_string()).collect();
        let types: Vec<TokenType> = list.iter().map(|(_, ty)| *ty).collect();
        SpecialTokens::new(&tokens, &types)
    }

    #[test]
    fn splits_control_tokens_only_when_asked() {
        let s = specials(&[("<|a|>", TokenType::Control), ("x", TokenType::Normal)]);
        assert_eq!(s.partition("hi<|a|>x<|a|>", true), [Text("hi"), Token(0), Text("x"), Token(0)]);
        assert_eq!(s.partition("hi<|a|>", false), [Text("hi<|a|>")]);
        assert_eq!(s.partition("", true), [Text("")]);
    }

    #[test]
    fn user_defined_tokens_split_even_without_parse_special() {
        let s = specials(&[("<tab>", TokenType::UserDefined)]);
        assert_eq!(s.partition("a<tab>b", false), [Text("a"), Token(0), Text("b")]);
    }

    #[test]
    fn longest_token_wins_wherever_it_is() {
        // "xyz" is matched first although "wx" starts earlier (llama.cpp's order).
        let s = specials(&[("wx", TokenType::Control), ("xyz", TokenType::Control)]);
        assert_eq!(s.partition("wxyz", true), [Text("w"), Token(1)]);
        let s = specials(&[("<s>", TokenType::Control), ("<s><s>", TokenType::Control)]);
        assert_eq!(s.partition("<s><s><s>", true), [Token(1), Token(0)]);
    }
}
