//! Word and character k-shingles (seed 000, seed 004: "k-shingling of a
//! document transforms the document into a set containing all windows of k
//! contiguous terms").
//!
//! A word shingle's text is its k tokens joined by single spaces; a
//! character shingle is k consecutive characters (Unicode scalar values) of
//! the normalised text (tokens joined by single spaces). Each is hashed with
//! XXH3-64 under the configuration seed. Shingles are produced as a multiset
//! in document order; the set view is the same shingles with repeats
//! dropped ([`SignatureVector::to_set`](crate::SignatureVector::to_set), or
//! set Jaccard, which ignores frequencies).
//!
//! A document with at least one token but fewer than k tokens (characters)
//! has exactly one shingle, its whole text, so short documents still compare.

use crate::hash::hash_bytes;
use crate::text::Tokens;

/// Calls `emit` with the text of every word k-shingle, in order.
fn word_shingles_with(tokens: &Tokens, k: usize, scratch: &mut String, mut emit: impl FnMut(&str)) {
    let n = tokens.len();
    if n == 0 || k == 0 {
        return;
    }
    let windows = if n < k { 1 } else { n - k + 1 };
    for start in 0..windows {
        scratch.clear();
        for i in start..(start + k).min(n) {
            if i > start {
                scratch.push(' ');
            }
            scratch.push_str(tokens.get(i));
        }
        emit(scratch);
    }
}

/// Calls `emit` with every character k-shingle of `normalized`, in order.
fn char_shingles_with<'a>(normalized: &'a str, k: usize, mut emit: impl FnMut(&'a str)) {
    if normalized.is_empty() || k == 0 {
        return;
    }
    // Byte offsets of every character start, plus the end.
    let bounds: Vec<usize> = normalized.char_indices().map(|(i, _)| i).chain([normalized.len()]).collect();
    let chars = bounds.len() - 1;
    if chars < k {
        emit(normalized);
        return;
    }
    for start in 0..=chars - k {
        emit(&normalized[bounds[start]..bounds[start + k]]);
    }
}

/// The word k-shingles of `tokens` as text, in document order (a multiset).
///
/// ```
/// use neardex::{shingles::word_shingles, text::Tokens};
/// let s = word_shingles(&Tokens::from_text("to be or not to be"), 4);
/// assert_eq!(s, ["to be or not", "be or not to", "or not to be"]);
/// ```
pub fn word_shingles(tokens: &Tokens, k: usize) -> Vec<String> {
    let mut out = Vec::new();
    word_shingles_with(tokens, k, &mut String::new(), |s| out.push(s.to_owned()));
    out
}

/// The character k-shingles of `normalized` text, in order (a multiset).
///
/// ```
/// assert_eq!(neardex::shingles::char_shingles("abcab", 2), ["ab", "bc", "ca", "ab"]);
/// ```
pub fn char_shingles(normalized: &str, k: usize) -> Vec<String> {
    let mut out = Vec::new();
    char_shingles_with(normalized, k, |s| out.push(s.to_owned()));
    out
}

/// Appends the hash of every word k-shingle to `out` (`scratch` is left
/// holding the tokens joined by single spaces, in which each shingle is
/// hashed where it lies).
pub fn word_shingle_hashes(tokens: &Tokens, k: usize, seed: u64, scratch: &mut String, out: &mut Vec<u64>) {
    tokens.join_into(scratch);
    word_shingle_hashes_in_joined(tokens, scratch.as_bytes(), k, seed, out);
}

/// [`word_shingle_hashes`] of `tokens` whose text joined by single spaces
/// is `joined` ([`Tokens::join_bytes_into`]): each shingle is hashed where
/// it lies in `joined`, a slice from its first token's start to its last
/// token's end, instead of being copied together first. The hashes are
/// the same, shingle for shingle.
pub(crate) fn word_shingle_hashes_in_joined(tokens: &Tokens, joined: &[u8], k: usize, seed: u64, out: &mut Vec<u64>) {
    let n = tokens.len();
    if n == 0 || k == 0 {
        return;
    }
    debug_assert_eq!(joined.len(), (0..n).map(|i| tokens.token_len(i) + 1).sum::<usize>() - 1);
    if n <= k {
        // One shingle: the whole text.
        out.push(hash_bytes(joined, seed));
        return;
    }
    out.reserve(n - k + 1);
    // The window [start, end) of tokens first..first + k in `joined`.
    let mut start = 0;
    let mut end = (0..k).map(|i| tokens.token_len(i)).sum::<usize>() + k - 1;
    for first in 0..=n - k {
        out.push(hash_bytes(&joined[start..end], seed));
        if first + k < n {
            start += tokens.token_len(first) + 1;
            end += tokens.token_len(first + k) + 1;
        }
    }
}

/// Appends the hash of every character k-shingle of `normalized` to `out`.
pub fn char_shingle_hashes(normalized: &str, k: usize, seed: u64, out: &mut Vec<u64>) {
    char_shingles_with(normalized, k, |s| out.push(hash_bytes(s.as_bytes(), seed)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_documents_have_one_shingle() {
        assert_eq!(word_shingles(&Tokens::from_text("just two"), 4), ["just two"]);
        assert!(word_shingles(&Tokens::from_text("!!"), 4).is_empty());
        assert_eq!(char_shingles("ab", 5), ["ab"]);
        assert!(char_shingles("", 5).is_empty());
    }

    proptest::proptest! {
        /// Hashing each shingle where it lies in the joined text gives the
        /// hashes of the shingles copied together ([`word_shingles`]), in
        /// the same order, from either join of the tokens.
        #[test]
        fn shingles_hashed_in_the_joined_text_are_the_copied_shingles(
            text in "([a-zé0-9]{0,7}[ ,.!'\u{4e00}]{0,3}){0,40}",
            k in 0usize..6,
            seed: u64,
        ) {
            let tokens = Tokens::from_text(&text);
            let mut joined = Vec::new();
            tokens.join_bytes_into(&mut joined);
            let (mut copied, mut in_place) = (Vec::new(), Vec::new());
            word_shingle_hashes(&tokens, k, seed, &mut String::new(), &mut copied);
            word_shingle_hashes_in_joined(&tokens, &joined, k, seed, &mut in_place);
            proptest::prop_assert_eq!(&in_place, &copied);
            let expected: Vec<u64> = word_shingles(&tokens, k).iter().map(|s| hash_bytes(s.as_bytes(), seed)).collect();
            proptest::prop_assert_eq!(in_place, expected);
        }
    }

    #[test]
    fn char_shingles_count_characters_not_bytes() {
        assert_eq!(char_shingles("été", 2), ["ét", "té"]);
    }
}
