//! Byte-pair merges. `tokenizer.ggml.merges` lists pairs `"left right"` in priority order (rank =
//! index). A word starts as one token per byte; the adjacent pair with the lowest rank is merged
//! (leftmost on a tie) until no listed pair remains. This is llama.cpp's `llm_tokenizer_bpe_session`
//! (a priority queue of bigrams over a linked list of symbols), done on token ids instead of
//! strings so that a lookup is one hash of two `u32`s.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::error::{Error, Result};
use crate::gguf::Value;

/// Stands for a byte whose character is missing from the vocabulary (a malformed vocabulary):
/// it takes part in no merge and is dropped from the output, as llama.cpp drops pieces it cannot
/// find.
pub const NO_TOKEN: u32 = u32::MAX;

/// The merge table: `(left, right) → (rank, merged)`.
#[derive(Debug, Default)]
pub struct Merges {
    ranks: HashMap<(u32, u32), (u32, u32)>,
}

impl Merges {
    /// Parses the merges against the vocabulary. A merge whose parts or result are not tokens can
    /// never produce a token id, so it is skipped (HF `tokenizers` refuses such files outright).
    pub fn from_gguf(merges: &[Value], token_to_id: &HashMap<String, u32>) -> Result<Merges> {
        let mut ranks = HashMap::with_capacity(merges.len());
        for (rank, merge) in merges.iter().enumerate() {
            let text = merge.as_str().ok_or_else(|| Error::Tokenizer(format!("merge {rank} is not a string")))?;
            // llama.cpp searches for the separator after the first byte, so a left part may
            // itself start with a space. (After the first character: the same thing in UTF-8.)
            let first = text.chars().next().map_or(0, char::len_utf8);
            let Some(split) = text[first..].find(' ').map(|i| i + first) else {
                return Err(Error::Tokenizer(format!("merge {rank} ({text:?}) has no space between its two parts")));
            };
            let (left, right) = (&text[..split], &text[split + 1..]);
            let ids = (token_to_id.get(left), token_to_id.get(right), token_to_id.get(&format!("{left}{right}")));
            if let (Some(&l), Some(&r), Some(&merged)) = ids {
                // The first listing of a pair wins, as in llama.cpp's `bpe_ranks.emplace`.
                ranks.entry((l, r)).or_insert((rank as u32, merged));
            }
        }
        Ok(Merges { ranks })
    }

    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// Merges `word` (one token id per initial symbol) in place.
    pub fn apply(&self, word: &mut Vec<u32>) {
        let n = word.len();
        // Positions are packed into 32 bits below; a single 4 GiB word stays as bytes.
        if n < 2 || n > u32::MAX as usize {
            return;
        }
        // A doubly linked list over positions; `n` / `usize::MAX` mean "none".
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut alive = vec![true; n];
        // Min-heap on (rank, left position), packed in a u64: the lowest rank first, the leftmost
        // on a tie, which is llama.cpp's `llm_bigram_bpe::comparator`. Entries go stale when a
        // neighbour merges; a popped entry is valid only if the pair now at that position still
        // has that rank. Every live pair has an entry, so a valid top is the true minimum.
        let key = |rank: u32, left: usize| Reverse((u64::from(rank) << 32) | left as u64);
        let rank_of = |word: &[u32], left: usize, right: usize| self.ranks.get(&(word[left], word[right])).copied();
        let mut queue: BinaryHeap<_> =
            (0..n - 1).filter_map(|i| rank_of(word, i, i + 1).map(|(rank, _)| key(rank, i))).collect();
        while let Some(Reverse(packed)) = queue.pop() {
            let (rank, left) = ((packed >> 32) as u32, (packed & u64::from(u32::MAX)) as usize);
            let right = next[left];
            if !alive[left] || right >= n {
                continue;
            }
            let merged = match rank_of(word, left, right) {
                Some((current, merged)) if current == rank => merged,
                _ => continue,
            };
            word[left] = merged;
            alive[right] = false;
            next[left] = next[right];
            if next[right] < n {
                prev[next[right]] = left;
            }
            if prev[left] < n
                && let Some((rank, _)) = rank_of(word, prev[left], left)
            {
                queue.push(key(rank, prev[left]));
            }
            if next[left] < n
                && let Some((rank, _)) = rank_of(word, left, next[left])
            {
                queue.push(key(rank, left));
            }
        }
        let mut i = 0;
        word.retain(|_| {
            i += 1;
            alive[i - 1]
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merges(vocab: &[&str], list: &[&str]) -> (Merges, HashMap<String, u32>) {
        let ids: HashMap<String, u32> = vocab.iter().enumerate().map(|(i, t)| (t.to_string(), i as u32)).collect();
        let values: Vec<Value> = list.iter().map(|m| Value::String(m.to_string())).collect();
        (Merges::from_gguf(&values, &ids).unwrap(), ids)
    }

    fn run(m: &Merges, ids: &HashMap<String, u32>, word: &[&str]) -> Vec<u32> {
        let mut w: Vec<u32> = word.iter().map(|t| ids[*t]).collect();
        m.apply(&mut w);
        w
    }

    #[test]
    fn lowest_rank_first_then_leftmost() {
        let vocab = ["a", "b", "c", "ab", "bc", "abc"];
        // "b c" outranks "a b": abc → a + bc, and no (a, bc) merge exists.
        let (m, ids) = merges(&vocab, &["b c", "a b", "ab c"]);
        assert_eq!(run(&m, &ids, &["a", "b", "c"]), [ids["a"], ids["bc"]]);
        // Equal pairs: the leftmost merges first: a a a → aa a.
        let (m, ids) = merges(&["a", "aa"], &["a a"]);
        assert_eq!(run(&m, &ids, &["a", "a", "a"]), [1, 0]);
        assert_eq!(run(&m, &ids, &["a", "a", "a", "a"]), [1, 1]);
    }

    #[test]
    fn chains_of_merges() {
        let vocab = ["l", "o", "w", "lo", "low", "e", "r", "er", "lower"];
        let (m, ids) = merges(&vocab, &["l o", "lo w", "e r", "low er"]);
        assert_eq!(run(&m, &ids, &["l", "o", "w", "e", "r"]), [ids["lower"]]);
        assert_eq!(run(&m, &ids, &["o", "w"]), [ids["o"], ids["w"]]);
        assert_eq!(run(&m, &ids, &["l"]), [ids["l"]]);
        assert_eq!(run(&m, &ids, &[]), Vec::<u32>::new());
    }

    #[test]
    fn unknown_parts_and_bad_strings() {
        let ids: HashMap<String, u32> = [("a".to_string(), 0)].into();
        let ok = Merges::from_gguf(&[Value::String("a zz".into())], &ids).unwrap();
        assert_eq!(ok.len(), 0);
        assert!(Merges::from_gguf(&[Value::String("ab".into())], &ids).is_err());
        assert!(Merges::from_gguf(&[Value::U32(3)], &ids).is_err());
        let mut word = vec![NO_TOKEN, 0, NO_TOKEN];
        ok.apply(&mut word);
        assert_eq!(word, [NO_TOKEN, 0, NO_TOKEN]);
    }
}
