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
        let mut words = WordTable::default();
        for word in &config.stopwords {
            words.insert(word, SKIP_BIT);
        }
        let mut specs = Vec::with_capacity(config.specs.len());
        for (i, spec) in config.specs.iter().enumerate().take(MAX_SPOT_SPECS) {
            for antecedent in &spec.antecedents {
                words.insert(antecedent, SKIP_BIT | (1 << i));
            }
            specs.push(CompiledSpec {
                distance: spec.distance as usize,
                chain: spec.chain as usize,
                seed: spec_seed(seed, spec),
            });
        }
        SpotExtractor { words, specs }
    }

    /// Appends the hash of every spot signature of `tokens` to `out`, in
    /// document order (a multiset: repeats are kept).
    pub fn extract_hashes(&self, tokens: &Tokens, classes: &mut Vec<u64>, out: &mut Vec<u64>) {
        let mut text = Vec::with_capacity(64);
        self.walk(tokens, classes, |spec, antecedent, chain| {
            text.clear();
            text.extend_from_slice(tokens.get(antecedent).as_bytes());
            for &word in chain {
                text.push(b':');
                text.extend_from_slice(tokens.get(word).as_bytes());
            }
            out.push(hash_bytes(&text, self.specs[spec].seed));
        });
    }

    /// Every spot signature of `tokens` in readable form, in document order.
    pub fn extract(&self, tokens: &Tokens) -> Vec<SpotSignature> {
        let mut out = Vec::new();
        self.walk(tokens, &mut Vec::new(), |spec, antecedent, chain| {
            out.push(SpotSignature {
                spec,
                antecedent: tokens.get(antecedent).to_owned(),
                chain: chain.iter().map(|&w| tokens.get(w).to_owned()).collect(),
            });
        });
        out
    }

    /// Calls `emit(spec, antecedent position, chain positions)` for every
    /// signature. `classes` is scratch space reused across calls.
    fn walk(&self, tokens: &Tokens, classes: &mut Vec<u64>, mut emit: impl FnMut(usize, usize, &[usize])) {
        classes.clear();
        classes.extend(tokens.iter().map(|t| self.words.get(t)));
        let n = classes.len();
        let mut chain = Vec::with_capacity(8);
        for (position, &class) in classes.iter().enumerate() {
            let mut antecedent_of = class & !SKIP_BIT;
            while antecedent_of != 0 {
                let spec_index = antecedent_of.trailing_zeros() as usize;
                antecedent_of &= antecedent_of - 1;
                let spec = &self.specs[spec_index];
                chain.clear();
                let mut at = position;
                while chain.len() < spec.chain {
                    at += spec.distance;
                    while at < n && classes[at] & SKIP_BIT != 0 {
                        at += 1;
                    }
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

/// An open-addressing table from word to class bits, keyed by XXH3-64 of
/// the word. Looking a token up costs one short hash and usually one probe.
#[derive(Debug, Clone)]
struct WordTable {
    slots: Vec<Option<(u64, Box<str>, u64)>>,
    len: usize,
}

impl Default for WordTable {
    fn default() -> Self {
        WordTable { slots: vec![None; 16], len: 0 }
    }
}

impl WordTable {
    fn slot_of(&self, hash: u64) -> usize {
        (hash as usize) & (self.slots.len() - 1)
    }

    /// ORs `bits` into the class of `word`.
    fn insert(&mut self, word: &str, bits: u64) {
        if (self.len + 1) * 2 > self.slots.len() {
            let grown = vec![None; self.slots.len() * 2];
            let old = std::mem::replace(&mut self.slots, grown);
            self.len = 0;
            for (_, word, bits) in old.into_iter().flatten() {
                self.insert(&word, bits);
            }
        }
        let hash = hash_bytes(word.as_bytes(), 0);
        let mut i = self.slot_of(hash);
        loop {
            match &mut self.slots[i] {
                Some((h, w, b)) if *h == hash && **w == *word => {
                    *b |= bits;
                    return;
                }
                Some(_) => i = (i + 1) & (self.slots.len() - 1),
                empty @ None => {
                    *empty = Some((hash, word.into(), bits));
                    self.len += 1;
                    return;
                }
            }
        }
    }

    /// The class bits of `word` (0 for an ordinary word).
    #[inline]
    fn get(&self, word: &str) -> u64 {
        let hash = hash_bytes(word.as_bytes(), 0);
        let mut i = self.slot_of(hash);
        loop {
            match &self.slots[i] {
                Some((h, w, b)) => {
                    if *h == hash && **w == *word {
                        return *b;
                    }
                    i = (i + 1) & (self.slots.len() - 1);
                }
                None => return 0,
            }
        }
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
        e.extract_hashes(&tokens, &mut Vec::new(), &mut hashes);
        assert_eq!(hashes.len(), 2);
        assert_ne!(hashes[0], hashes[1]);
    }
}
