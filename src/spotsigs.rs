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
use crate::text::words::WordTable;
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
        let SpotScratch { walk, text } = scratch;
        self.walk(tokens, walk, |spec, antecedent, chain| {
            let mut at = tokens.copy_token(antecedent, text, 0);
            for &word in chain {
                text[at] = b':';
                at = tokens.copy_token(word, text, at + 1);
            }
            out.push(hash_bytes(&text[..at], self.specs[spec].seed));
        });
    }

    /// Every spot signature of `tokens` in readable form, in document order.
    pub fn extract(&self, tokens: &Tokens) -> Vec<SpotSignature> {
        let mut out = Vec::new();
        self.walk(tokens, &mut WalkBuffers::default(), |spec, antecedent, chain| {
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
    fn walk(&self, tokens: &Tokens, buffers: &mut WalkBuffers, mut emit: impl FnMut(usize, usize, &[usize])) {
        let WalkBuffers { classes, next, antecedents, chain } = buffers;
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
                    emit(spec_index, position, chain);
                }
            }
        }
    }
}

/// Scratch space that [`SpotExtractor::extract_hashes`] reuses across
/// documents.
#[derive(Debug, Default, Clone)]
pub struct SpotScratch {
    walk: WalkBuffers,
    /// The bytes of one signature, "antecedent:word:word", written with
    /// the tokens' block moves (bytes past its end are slack).
    text: Vec<u8>,
}

/// The buffers of a walk.
#[derive(Debug, Default, Clone)]
struct WalkBuffers {
    /// Each token's class bits.
    classes: Vec<u64>,
    /// Each position's next token that is no stopword (see `walk`).
    next: Vec<usize>,
    /// The antecedents' positions, in order.
    antecedents: Vec<usize>,
    /// The chain of the signature being emitted.
    chain: Vec<usize>,
}

impl SpotScratch {
    /// Bytes the buffers hold allocated.
    pub fn capacity_bytes(&self) -> usize {
        let WalkBuffers { classes, next, antecedents, chain } = &self.walk;
        classes.capacity() * std::mem::size_of::<u64>()
            + (next.capacity() + antecedents.capacity() + chain.capacity()) * std::mem::size_of::<usize>()
            + self.text.capacity()
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
        assert_eq!(e.words.buckets(), 512);
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
