//! [`Signer`]: a validated configuration compiled into the pipeline
//! text → tokens → signatures → vector, fingerprint, MinHash, band keys.

use crate::config::{Scheme, SignatureConfig};
use crate::error::ConfigError;
use crate::hash::{hash_bytes, Fingerprint};
use crate::shingles::{char_shingle_hashes, char_shingles, word_shingle_hashes_in_joined, word_shingles};
use crate::sketch::{band_keys, MinHashSketch, MinHasher};
use crate::spotsigs::{spec_seed, SpotExtractor};
use crate::text::{decode_html, html_to_text_into, Tokens};
use crate::vector::SignatureVector;

/// Everything the index stores about a document's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentSignature {
    /// The signature multiset.
    pub vector: SignatureVector,
    /// The exact-content fingerprint.
    pub fingerprint: Fingerprint,
    /// The MinHash sketch of the signature set.
    pub minhash: MinHashSketch,
    /// The LSH band keys of the sketch (empty for a document without
    /// signatures).
    pub band_keys: Vec<u64>,
}

/// Reusable buffers for signing many documents on one thread.
#[derive(Debug, Default)]
pub struct Scratch {
    text: String,
    tokens: Tokens,
    spots: crate::spotsigs::SpotScratch,
    hashes: Vec<u64>,
    /// The tokens joined by single spaces (valid UTF-8).
    joined: Vec<u8>,
}

impl Scratch {
    /// Bytes the buffers hold allocated.
    fn capacity_bytes(&self) -> usize {
        self.text.capacity()
            + self.tokens.capacity_bytes()
            + self.spots.capacity_bytes()
            + self.hashes.capacity() * std::mem::size_of::<u64>()
            + self.joined.capacity()
    }
}

/// What a thread's signing buffers may keep between documents; one larger
/// document's buffers are freed after it.
const THREAD_SCRATCH_LIMIT: usize = 4 << 20;

thread_local! {
    static THREAD_SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's signing buffers: a fresh set for every
/// document cost some thirty allocations a page.
fn with_thread_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    THREAD_SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let result = f(&mut scratch);
            if scratch.capacity_bytes() > THREAD_SCRATCH_LIMIT {
                *scratch = Scratch::default();
            }
            result
        }
        // Not reachable (signing does not sign), but never a panic.
        Err(_) => f(&mut Scratch::default()),
    })
}

/// One signature in readable form with its hash, for `explain` output and
/// tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainedSignature {
    /// The signature's text (`a:rally:kick`, `my name is inigo`, `ab`).
    pub text: String,
    /// Its 64-bit hash.
    pub hash: u64,
}

/// Turns documents into signatures under one [`SignatureConfig`].
/// Immutable and `Sync`: share one across threads.
#[derive(Debug, Clone)]
pub struct Signer {
    config: SignatureConfig,
    extractor: Extractor,
    /// Signs a document in which `extractor` finds nothing.
    fallback: Option<Extractor>,
    minhasher: MinHasher,
}

#[derive(Debug, Clone)]
enum Extractor {
    Spot(SpotExtractor),
    Words(usize),
    Chars(usize),
}

impl Signer {
    /// Validates and compiles `config`.
    ///
    /// # Errors
    /// The [`ConfigError`] of [`SignatureConfig::validate`].
    pub fn new(config: SignatureConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let compile = |scheme: &Scheme| match scheme {
            Scheme::SpotSigs(spot) => Extractor::Spot(SpotExtractor::new(spot, config.hash_seed)),
            Scheme::WordShingles { k } => Extractor::Words(*k as usize),
            Scheme::CharShingles { k } => Extractor::Chars(*k as usize),
        };
        let extractor = compile(&config.scheme);
        let fallback = config.fallback.as_ref().map(compile);
        let minhasher = MinHasher::new(config.minhash.permutations, config.hash_seed);
        Ok(Signer { config, extractor, fallback, minhasher })
    }

    /// The configuration.
    pub fn config(&self) -> &SignatureConfig {
        &self.config
    }

    /// The MinHash sketcher of the configuration.
    pub fn minhasher(&self) -> &MinHasher {
        &self.minhasher
    }

    /// Signs plain text. Reuses buffers kept per thread, as
    /// [`Self::sign_text_with`] does with a caller's.
    pub fn sign_text(&self, text: &str) -> DocumentSignature {
        with_thread_scratch(|scratch| self.sign_text_with(text, scratch))
    }

    /// Signs an HTML document given as bytes (charset sniffed as in
    /// [`decode_html`]). Reuses buffers kept per thread.
    pub fn sign_html(&self, html: &[u8]) -> DocumentSignature {
        self.sign_html_declared(html, None)
    }

    /// [`Self::sign_html`] of a page whose charset a transport header (an
    /// HTTP `Content-Type`) declared, weighed as [`decode_html`] weighs it.
    pub fn sign_html_declared(
        &self,
        html: &[u8],
        declared: Option<&'static encoding_rs::Encoding>,
    ) -> DocumentSignature {
        with_thread_scratch(|scratch| self.sign_decoded_html(html, declared, scratch))
    }

    /// [`Self::sign_html`] with reusable buffers.
    pub fn sign_html_with(&self, html: &[u8], scratch: &mut Scratch) -> DocumentSignature {
        self.sign_decoded_html(html, None, scratch)
    }

    fn sign_decoded_html(
        &self,
        html: &[u8],
        declared: Option<&'static encoding_rs::Encoding>,
        scratch: &mut Scratch,
    ) -> DocumentSignature {
        let mut text = std::mem::take(&mut scratch.text);
        text.clear();
        html_to_text_into(&decode_html(html, declared), &mut text);
        let signature = self.sign_text_with(&text, scratch);
        scratch.text = text;
        signature
    }

    /// [`Self::sign_text`] with reusable buffers.
    pub fn sign_text_with(&self, text: &str, scratch: &mut Scratch) -> DocumentSignature {
        scratch.tokens.tokenize(text);
        scratch.tokens.join_bytes_into(&mut scratch.joined);
        let fingerprint = Fingerprint::of_normalized_bytes(&scratch.joined, self.config.hash_seed);
        scratch.hashes.clear();
        self.hashes_of_tokens(scratch);
        let vector = SignatureVector::from_hash_buffer(&mut scratch.hashes);
        self.sign_vector(vector, fingerprint)
    }

    /// The full signature of a signature vector known already (a stored
    /// document's, say): its MinHash sketch and band keys are computed
    /// exactly as [`Signer::sign_text`] computes them.
    pub fn sign_vector(&self, vector: SignatureVector, fingerprint: Fingerprint) -> DocumentSignature {
        let minhash = self.minhasher.sketch(vector.hashes());
        let band_keys = band_keys(&minhash, self.config.minhash.lsh(), self.config.hash_seed);
        DocumentSignature { vector, fingerprint, minhash, band_keys }
    }

    /// The LSH band keys of a signature vector, as [`Signer::sign_vector`]
    /// computes them (a segment merge recomputes them from stored vectors).
    pub fn band_keys(&self, vector: &SignatureVector) -> Vec<u64> {
        let minhash = self.minhasher.sketch(vector.hashes());
        band_keys(&minhash, self.config.minhash.lsh(), self.config.hash_seed)
    }

    /// The signature hashes of plain text in document order (a multiset),
    /// appended to `out`: the signature step alone, without sketches.
    pub fn signature_hashes(&self, text: &str, scratch: &mut Scratch, out: &mut Vec<u64>) {
        scratch.tokens.tokenize(text);
        let joins = |e: &Extractor| matches!(e, Extractor::Chars(_) | Extractor::Words(_));
        if joins(&self.extractor) || self.fallback.as_ref().is_some_and(joins) {
            scratch.tokens.join_bytes_into(&mut scratch.joined);
        }
        std::mem::swap(&mut scratch.hashes, out);
        self.hashes_of_tokens(scratch);
        std::mem::swap(&mut scratch.hashes, out);
    }

    /// Appends the signature hashes of `scratch.tokens` (and, for word and
    /// character shingles, `scratch.joined`, which must be their join) to
    /// `scratch.hashes`: the scheme's, or the fallback's when the scheme
    /// finds none.
    fn hashes_of_tokens(&self, scratch: &mut Scratch) {
        let start = scratch.hashes.len();
        self.extract(&self.extractor, scratch);
        if let Some(fallback) = self.fallback.as_ref().filter(|_| scratch.hashes.len() == start) {
            self.extract(fallback, scratch);
        }
        let filter = &self.config.frequency_filter;
        if !filter.is_empty() {
            let hashes = &mut scratch.hashes;
            let mut kept = start;
            for i in start..hashes.len() {
                if !filter.contains(hashes[i]) {
                    hashes[kept] = hashes[i];
                    kept += 1;
                }
            }
            hashes.truncate(kept);
        }
    }

    /// Appends what `extractor` finds in `scratch.tokens` (or
    /// `scratch.joined`) to `scratch.hashes`.
    fn extract(&self, extractor: &Extractor, scratch: &mut Scratch) {
        let seed = self.config.hash_seed;
        match extractor {
            Extractor::Spot(spot) => spot.extract_hashes(&scratch.tokens, &mut scratch.spots, &mut scratch.hashes),
            Extractor::Words(k) => {
                word_shingle_hashes_in_joined(&scratch.tokens, &scratch.joined, *k, seed, &mut scratch.hashes)
            }
            Extractor::Chars(k) => {
                let joined = match std::str::from_utf8(&scratch.joined) {
                    Ok(text) => std::borrow::Cow::Borrowed(text),
                    // Not reached: whole tokens and spaces are valid UTF-8.
                    Err(_) => std::borrow::Cow::Owned(scratch.tokens.joined()),
                };
                char_shingle_hashes(&joined, *k, seed, &mut scratch.hashes)
            }
        }
    }

    /// Every signature of plain text in readable form with its hash, in
    /// document order (those the frequency filter drops left out).
    pub fn explain(&self, text: &str) -> Vec<ExplainedSignature> {
        let mut signatures = self.explain_unfiltered(text);
        let filter = &self.config.frequency_filter;
        signatures.retain(|s| !filter.contains(s.hash));
        signatures
    }

    fn explain_unfiltered(&self, text: &str) -> Vec<ExplainedSignature> {
        let tokens = Tokens::from_text(text);
        let signatures = self.explain_with(&self.extractor, &tokens);
        match &self.fallback {
            Some(fallback) if signatures.is_empty() => self.explain_with(fallback, &tokens),
            _ => signatures,
        }
    }

    fn explain_with(&self, extractor: &Extractor, tokens: &Tokens) -> Vec<ExplainedSignature> {
        let seed = self.config.hash_seed;
        let plain = |texts: Vec<String>| {
            texts.into_iter().map(|text| ExplainedSignature { hash: hash_bytes(text.as_bytes(), seed), text }).collect()
        };
        match (extractor, &self.config.scheme) {
            (Extractor::Spot(spot), Scheme::SpotSigs(cfg)) => spot
                .extract(tokens)
                .into_iter()
                .map(|s| {
                    let text = s.to_string();
                    let hash = hash_bytes(text.as_bytes(), spec_seed(seed, &cfg.specs[s.spec]));
                    ExplainedSignature { text, hash }
                })
                .collect(),
            (Extractor::Words(k), _) => plain(word_shingles(tokens, *k)),
            (Extractor::Chars(k), _) => plain(char_shingles(&tokens.joined(), *k)),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::html_to_text;

    #[test]
    fn a_declared_charset_signs_as_the_decoded_text() {
        let signer = Signer::new(SignatureConfig::word_shingles(1)).unwrap();
        // "café crème" in windows-1252, with no meta charset: the declared
        // label decides (as UTF-8 the bytes would be replaced).
        let page: &[u8] = b"<html><body><p>caf\xe9 cr\xe8me au lait</p></body></html>";
        let latin = encoding_rs::Encoding::for_label(b"windows-1252");
        let declared = signer.sign_html_declared(page, latin);
        assert_eq!(declared, signer.sign_text(&html_to_text(&decode_html(page, latin))));
        assert_eq!(declared, signer.sign_text("café crème au lait"));
        assert_eq!(signer.sign_html_declared(page, None), signer.sign_html(page));
    }
}
