//! Spot signatures, exactly as §3 of the SpotSigs paper.
//!
//! For every occurrence of an antecedent `a` of a specification `a(d, c)`,
//! the chain is built by stepping `d` tokens forward; when the token landed
//! on is a stopword (or an antecedent) the chain moves on to the next
//! non-stopword, takes it, and steps `d` again from there, until it holds `c`
//! words. At the end of the document a chain is cut off and kept if it holds
//! at least one word, and dropped otherwise. Chains may overlap: an
//! antecedent inside another chain starts its own. Several specifications
//! apply at once; a token that is an antecedent of several specifications
//! starts one chain for each.
//!
//! A signature's text is the paper's notation, `antecedent:word1:word2`, and
//! its hash is XXH3-64 of that text under a seed derived from the
//! configuration seed and the specification's `(d, c)` (FORMAT.md,
//! "Signatures and hashes"), so equal chains from different specifications
//! stay distinct features.

use crate::config::{SpotSigsConfig, SpotSpec};
use crate::hash::{derive_seed, hash_bytes};
use crate::text::Tokens;

/// Bit set in a token's class when the token is a stopword or an antecedent
/// (skipped inside chains). Bits 0..=62 mark the specifications the token is
/// an antecedent of.
const SKIP_BIT: u64 = 1 << 63;

/// The most specifications one extractor handles (one class bit each).
pub const MAX_SPOT_SPECS: usize = 63;

/// A SpotSigs configuration compiled for extraction.
#[derive(Debug, Clone)]
pub struct SpotExtractor {
    words: WordTable,
    specs: Vec<CompiledSpec>,
}

#[derive(Debug, Clone)]
struct CompiledSpec {
    distance: usize,
    chain: usize,
    seed: u64,
}

/// One spot signature in readable form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotSignature {
    /// Index of the `a(d, c)` specification that produced it.
    pub spec: usize,
    /// The antecedent.
    pub antecedent: String,
    /// The chain words (fewer than `c` only when cut off at the end).
    pub chain: Vec<String>,
}

impl std::fmt::Display for SpotSignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.antecedent)?;
        for word in &self.chain {
            write!(f, ":{word}")?;
        }
        Ok(())
    }
}

/// The seed of one specification's signature hashes: XXH3-64 of
/// `"spotsig" ‖ d (u32 LE) ‖ c (u32 LE)` under the configuration seed.
pub fn spec_seed(seed: u64, spec: &SpotSpec) -> u64 {
    let mut domain = b"spotsig".to_vec();
    domain.extend_from_slice(&spec.distance.to_le_bytes());
    domain.extend_from_slice(&spec.chain.to_le_bytes());
    derive_seed(seed, &domain)
}

impl SpotExtractor {
    /// Compiles a configuration that has passed validation (at most
    /// [`MAX_SPOT_SPECS`] specifications).
    pub(crate) fn new(config: &SpotSigsConfig, seed: u64) -> Self {
        let mut entries: Vec<(&str, u64)> = config.stopwords.iter().map(|w| (w.as_str(), SKIP_BIT)).collect();
        let mut specs = Vec::with_capacity(config.specs.len());
        for (i, spec) in config.specs.iter().enumerate().take(MAX_SPOT_SPECS) {
            entries.extend(spec.antecedents.iter().map(|a| (a.as_str(), SKIP_BIT | (1 << i))));
            specs.push(CompiledSpec {
                distance: spec.distance as usize,
                chain: spec.chain as usize,
                seed: spec_seed(seed, spec),
            });
        }
        SpotExtractor { words: WordTable::build(&entries), specs }
    }

    /// Appends the hash of every spot signature of `tokens` to `out`, in
    /// document order (a multiset: repeats are kept).
    pub fn extract_hashes(&self, tokens: &Tokens, scratch: &mut SpotScratch, out: &mut Vec<u64>) {
        // "antecedent:word:word", written with the tokens' block copies;
        // bytes past `at` are slack.
        let mut text = Vec::with_capacity(128);
        self.walk(tokens, scratch, |spec, antecedent, chain| {
            let mut at = tokens.copy_token(antecedent, &mut text, 0);
            for &word in chain {
                text[at] = b':';
                at = tokens.copy_token(word, &mut text, at + 1);
            }
            out.push(hash_bytes(&text[..at], self.specs[spec].seed));
        });
    }

    /// Every spot signature of `tokens` in readable form, in document order.
    pub fn extract(&self, tokens: &Tokens) -> Vec<SpotSignature> {
        let mut out = Vec::new();
        self.walk(tokens, &mut SpotScratch::default(), |spec, antecedent, chain| {
            out.push(SpotSignature {
                spec,
                antecedent: tokens.get(antecedent).to_owned(),
                chain: chain.iter().map(|&w| tokens.get(w).to_owned()).collect(),
            });
        });
        out
    }

    /// Calls `emit(spec, antecedent position, chain positions)` for every
    /// signature.
    ///
    /// Whether a token is a stopword, or an antecedent, is a coin toss in
    /// prose, so the walk does not branch on it token by token: the
    /// positions of the antecedents are listed, and each position's next
    /// token that is no stopword is tabled (a backward pass), so that a
    /// chain steps `d` tokens ahead and then to that token in one load.
    fn walk(&self, tokens: &Tokens, scratch: &mut SpotScratch, mut emit: impl FnMut(usize, usize, &[usize])) {
        let SpotScratch { classes, next, antecedents } = scratch;
        classes.clear();
        classes.extend((0..tokens.len()).map(|i| match tokens.packed(i) {
            Some(key) => self.words.get_packed(key),
            None => self.words.get(tokens.get(i)),
        }));
        let n = classes.len();
        // next[i]: the first position at or after i whose token is no
        // stopword, or n; next[n] = n.
        next.clear();
        next.resize(n + 1, n);
        // Carried in a register, so that the choice is a conditional move
        // rather than a branch around a load.
        let mut following = n;
        for i in (0..n).rev() {
            following = if classes[i] & SKIP_BIT != 0 { following } else { i };
            next[i] = following;
        }
        antecedents.clear();
        antecedents.resize(n, 0);
        let mut count = 0;
        for (position, &class) in classes.iter().enumerate() {
            // `count` is at most `position` here.
            antecedents[count] = position;
            count += usize::from(class & !SKIP_BIT != 0);
        }
        let mut chain = Vec::with_capacity(8);
        for &position in &antecedents[..count] {
            let mut antecedent_of = classes[position] & !SKIP_BIT;
            while antecedent_of != 0 {
                let spec_index = antecedent_of.trailing_zeros() as usize;
                antecedent_of &= antecedent_of - 1;
                let spec = &self.specs[spec_index];
                chain.clear();
                let mut at = position;
                while chain.len() < spec.chain {
                    at = next[(at + spec.distance).min(n)];
                    if at >= n {
                        break;
                    }
                    chain.push(at);
                }
                if !chain.is_empty() {
                    emit(spec_index, position, &chain);
                }
            }
        }
    }
}

/// Scratch space that [`SpotExtractor::extract_hashes`] reuses across
/// documents.
#[derive(Debug, Default, Clone)]
pub struct SpotScratch {
    /// Each token's class bits.
    classes: Vec<u64>,
    /// Each position's next token that is no stopword (see `walk`).
    next: Vec<usize>,
    /// The antecedents' positions, in order.
    antecedents: Vec<usize>,
}

impl SpotScratch {
    /// Bytes the buffers hold allocated.
    pub fn capacity_bytes(&self) -> usize {
        self.classes.capacity() * std::mem::size_of::<u64>()
            + (self.next.capacity() + self.antecedents.capacity()) * std::mem::size_of::<usize>()
    }
}

/// Words a bucket of the [`WordTable`] holds ([`WordTable::get_packed`]
/// compares both).
const SLOTS: usize = 2;

/// Word to class bits. Words of at most 16 bytes (every default stopword
/// and antecedent) are packed into a `u128` (tokens never contain NUL, so
/// zero padding is unambiguous) and stored in buckets of [`SLOTS`], with
/// at least twice as many buckets as words; the hash multiplier is chosen
/// at build time so that no bucket overflows (for the default lists: 512
/// buckets, 28 KiB), and a look-up compares the two keys of one bucket
/// without branching. A list of thousands of words needs a sparser, larger
/// table to leave no bucket with three. Longer words live in a short list
/// that only tokens longer than 16 bytes consult.
#[derive(Debug, Clone)]
struct WordTable {
    keys: Vec<[u128; SLOTS]>,
    /// The classes of a bucket's words, then 0: the class of a miss.
    classes: Vec<[u64; SLOTS + 1]>,
    multiplier: u64,
    shift: u32,
    long: Vec<(Box<str>, u64)>,
}

impl Default for WordTable {
    fn default() -> Self {
        WordTable {
            keys: vec![[0; SLOTS]; 1],
            classes: vec![[0; SLOTS + 1]; 1],
            multiplier: 1,
            shift: 64,
            long: Vec::new(),
        }
    }
}

/// The packed form of a word of 1 to 16 bytes: its bytes as a little-endian
/// `u128`, zero-padded. Built from fixed-width loads (overlapping when the
/// word is not a multiple of their width) rather than a variable-length copy,
/// which would cost a `memcpy` call per token.
#[inline]
fn pack(word: &[u8]) -> Option<u128> {
    let n = word.len();
    let le64 = |b: &[u8]| b.try_into().map_or(0, u64::from_le_bytes);
    let le32 = |b: &[u8]| b.try_into().map_or(0, u32::from_le_bytes);
    match n {
        0 => None,
        1..=3 => Some(word.iter().rev().fold(0u128, |acc, &b| acc << 8 | u128::from(b))),
        4..=8 => {
            let low = u64::from(le32(&word[..4]));
            let high = u64::from(le32(&word[n - 4..])) >> (8 * (8 - n));
            Some(u128::from(low | high << 32))
        }
        9..=16 => {
            let low = le64(&word[..8]);
            let high = le64(&word[n - 8..]) >> (8 * (16 - n));
            Some(u128::from(low) | u128::from(high) << 64)
        }
        _ => None,
    }
}

impl WordTable {
    /// Builds the table of `(word, class bits)` entries; bits of repeated
    /// words are ORed together.
    fn build(entries: &[(&str, u64)]) -> Self {
        let mut long: Vec<(Box<str>, u64)> = Vec::new();
        let mut short: Vec<(u128, u64)> = Vec::new();
        for &(word, bits) in entries {
            match pack(word.as_bytes()) {
                Some(key) => match short.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, b)) => *b |= bits,
                    None => short.push((key, bits)),
                },
                None => match long.iter_mut().find(|(w, _)| **w == *word) {
                    Some((_, b)) => *b |= bits,
                    None => long.push((word.into(), bits)),
                },
            }
        }
        // At most a word per two buckets; double until some multiplier of a
        // fixed sequence leaves no bucket with more than SLOTS words.
        let mut buckets = (2 * short.len()).next_power_of_two().max(1);
        loop {
            let shift = 64 - buckets.trailing_zeros();
            let mut multiplier = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..64 {
                multiplier = multiplier.wrapping_mul(0xD6E8_FEB8_6659_FD93).wrapping_add(0xA076_1D64_78BD_642F) | 1;
                let mut table = WordTable {
                    keys: vec![[0; SLOTS]; buckets],
                    classes: vec![[0; SLOTS + 1]; buckets],
                    multiplier,
                    shift,
                    long: Vec::new(),
                };
                if short.iter().all(|&(key, bits)| table.place(key, bits)) {
                    table.long = long;
                    return table;
                }
            }
            buckets *= 2;
        }
    }

    #[inline]
    fn bucket_of(&self, key: u128) -> usize {
        let mixed = (key as u64) ^ ((key >> 64) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        mixed.wrapping_mul(self.multiplier).checked_shr(self.shift).unwrap_or(0) as usize
    }

    /// Puts a key in its bucket; false when the bucket is full.
    fn place(&mut self, key: u128, bits: u64) -> bool {
        let b = self.bucket_of(key);
        match self.keys[b].iter().position(|&k| k == 0) {
            Some(slot) => {
                self.keys[b][slot] = key;
                self.classes[b][slot] = bits;
                true
            }
            None => false,
        }
    }

    /// The class bits of `word` (0 for an ordinary word).
    fn get(&self, word: &str) -> u64 {
        match pack(word.as_bytes()) {
            Some(key) => self.get_packed(key),
            None => self.long.iter().find(|(w, _)| **w == *word).map_or(0, |&(_, b)| b),
        }
    }

    /// The class bits of a packed word of at most 16 bytes. Whether the
    /// word is in the table is a coin toss in prose (about half its tokens
    /// are stopwords), so the look-up has no branch on it: both keys are
    /// compared, and the outcome indexes the class to load, the miss's 0
    /// included (a masked or selected load compiles to a branch).
    #[inline]
    fn get_packed(&self, key: u128) -> u64 {
        let b = self.bucket_of(key);
        let (keys, classes) = (&self.keys[b], &self.classes[b]);
        // Slot 0, slot 1, or the miss (2): at most one key matches.
        let slot = 2 - 2 * usize::from(keys[0] == key) - usize::from(keys[1] == key);
        classes[slot]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extractor(specs: Vec<SpotSpec>) -> SpotExtractor {
        let config = SpotSigsConfig {
            specs,
            stopwords: crate::text::stopwords::DEFAULT_STOPWORDS.iter().map(|s| s.to_string()).collect(),
        };
        SpotExtractor::new(&config, 0)
    }

    fn spec(antecedents: &[&str], distance: u32, chain: u32) -> SpotSpec {
        SpotSpec { antecedents: antecedents.iter().map(|s| s.to_string()).collect(), distance, chain }
    }

    fn signatures(e: &SpotExtractor, text: &str) -> Vec<String> {
        e.extract(&Tokens::from_text(text)).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn distance_steps_over_all_tokens_then_skips_stopwords() {
        let e = extractor(vec![spec(&["the"], 2, 2)]);
        // the(2,2): 2 ahead of "the" is "is" (stop) -> "big"; 2 ahead of "big" is "dog".
        assert_eq!(signatures(&e, "the cat is big red dog"), ["the:big:dog"]);
    }

    #[test]
    fn chains_are_cut_at_the_end_but_never_empty() {
        let e = extractor(vec![spec(&["the"], 1, 3)]);
        assert_eq!(signatures(&e, "over the moon"), ["the:moon"]);
        assert!(signatures(&e, "over the").is_empty());
        assert!(signatures(&e, "all of the is").is_empty());
    }

    #[test]
    fn overlapping_chains_and_several_specs() {
        let e = extractor(vec![spec(&["is"], 3, 1), spec(&["is"], 2, 1), spec(&["the"], 1, 1)]);
        // The second "is" gets no is(3,1) chain: 3 ahead is past the end.
        let sigs = e.extract(&Tokens::from_text("the sky is blue and the sea is green today"));
        let text: Vec<String> = sigs.iter().map(|s| format!("{}{}", s.spec, s)).collect();
        assert_eq!(text, ["2the:sky", "0is:sea", "1is:sea", "2the:sea", "1is:today"]);
    }

    #[test]
    fn hashes_distinguish_specs_with_equal_text() {
        let e = extractor(vec![spec(&["is"], 3, 1), spec(&["is"], 2, 1)]);
        let mut hashes = Vec::new();
        // Both specifications land on "sea": the same text "is:sea" twice.
        let tokens = Tokens::from_text("it is a the sea");
        assert_eq!(e.extract(&tokens).iter().map(ToString::to_string).collect::<Vec<_>>(), ["is:sea", "is:sea"]);
        e.extract_hashes(&tokens, &mut SpotScratch::default(), &mut hashes);
        assert_eq!(hashes.len(), 2);
        assert_ne!(hashes[0], hashes[1]);
    }

    #[test]
    fn the_default_word_table_is_512_buckets() {
        let e = SpotExtractor::new(&SpotSigsConfig::default(), 0);
        assert_eq!((e.words.keys.len(), e.words.classes.len()), (512, 512));
        assert!(e.words.long.is_empty());
    }

    #[test]
    fn word_table_handles_long_words_and_growth() {
        let words: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        let mut entries: Vec<(&str, u64)> = words.iter().enumerate().map(|(i, w)| (w.as_str(), i as u64 + 1)).collect();
        entries.push(("incomprehensibilities", 7));
        entries.push(("w3", 1 << 40));
        let table = WordTable::build(&entries);
        for (i, w) in words.iter().enumerate() {
            let extra = if w == "w3" { 1 << 40 } else { 0 };
            assert_eq!(table.get(w), (i as u64 + 1) | extra, "{w}");
        }
        assert_eq!(table.get("incomprehensibilities"), 7);
        assert_eq!(table.get("incomprehensibility"), 0);
        assert_eq!(table.get("w2000"), 0);
        assert_eq!(table.get("exactlysixteenby"), 0);
        assert_eq!(WordTable::build(&[]).get("the"), 0);
    }

    #[test]
    fn pack_is_the_zero_padded_little_endian_word() {
        for n in 1..=16 {
            let word: Vec<u8> = (1..=n as u8).map(|b| b + b'a').collect();
            let mut buf = [0u8; 16];
            buf[..n].copy_from_slice(&word);
            assert_eq!(pack(&word), Some(u128::from_le_bytes(buf)), "length {n}");
        }
        assert_eq!(pack(b""), None);
        assert_eq!(pack(&[b'x'; 17]), None);
    }

    proptest::proptest! {
        /// The hashes are those of the readable signatures
        /// (`antecedent:word:word`), whatever the words' lengths: the
        /// block copies that build the hashed bytes write nothing else.
        #[test]
        fn hashes_are_of_the_readable_signatures(
            words in proptest::collection::vec("the|a|is|of|[a-z]{1,40}|\\PC{1,6}", 0..60),
        ) {
            let e = extractor(vec![spec(&["the", "a"], 1, 2), spec(&["is", "of"], 2, 3)]);
            let tokens = Tokens::from_text(&words.join(" "));
            let mut hashes = Vec::new();
            e.extract_hashes(&tokens, &mut SpotScratch::default(), &mut hashes);
            let expected: Vec<u64> = e
                .extract(&tokens)
                .iter()
                .map(|sig| hash_bytes(sig.to_string().as_bytes(), e.specs[sig.spec].seed))
                .collect();
            proptest::prop_assert_eq!(hashes, expected);
        }
    }
}
