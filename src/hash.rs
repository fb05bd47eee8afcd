//! The pinned hashes. Their outputs are stored on disk (signature hashes,
//! fingerprints, MinHash values, band keys), so they are part of the format:
//! FORMAT.md, "Signatures and hashes", and the golden vectors in
//! `tests/golden.rs` pin them.

use std::fmt;

use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64_with_seed};

/// The default seed of every signature hash: the ASCII bytes "neardex1" read
/// as a big-endian integer.
pub const DEFAULT_HASH_SEED: u64 = u64::from_be_bytes(*b"neardex1");

/// XXH3-64 of `bytes` with `seed`.
#[inline]
pub fn hash_bytes(bytes: &[u8], seed: u64) -> u64 {
    xxh3_64_with_seed(bytes, seed)
}

/// XXH3-64 of the little-endian bytes of `value`: the permutation of the hash
/// space that the sketches apply to signature hashes.
#[inline]
pub fn hash_u64(value: u64, seed: u64) -> u64 {
    xxh3_64_with_seed(&value.to_le_bytes(), seed)
}

/// Derives the seed of one sketch family from the configuration seed, so that
/// two families never share a permutation: XXH3-64 of the ASCII `domain`.
pub fn derive_seed(seed: u64, domain: &[u8]) -> u64 {
    xxh3_64_with_seed(domain, seed)
}

/// A 128-bit exact-content fingerprint: XXH3-128 of a document's tokens
/// joined by single spaces (lower-cased, markup and punctuation gone), so
/// two documents with the same words in the same order are exact duplicates
/// however their markup or white space differ.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub u128);

impl Fingerprint {
    /// The fingerprint of normalised text (tokens joined by single spaces).
    pub fn of_normalized(text: &str, seed: u64) -> Self {
        Self::of_normalized_bytes(text.as_bytes(), seed)
    }

    /// [`Self::of_normalized`] of the text's UTF-8 bytes.
    pub fn of_normalized_bytes(text: &[u8], seed: u64) -> Self {
        Fingerprint(xxh3_128_with_seed(text, seed))
    }

    /// Little-endian bytes, as stored on disk.
    pub fn to_le_bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}
