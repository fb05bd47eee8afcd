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
///
/// Inputs of 9 to 32 bytes (a word 3-shingle of English text is one of
/// 9–16 bytes about as often as one of 17–32) are hashed here without a
/// branch on the length: both of XXH3's ways for them are computed and the
/// length picks one, where `xxhash_rust` branches between them and the CPU
/// guesses wrong about every other shingle. Every other length goes to
/// `xxhash_rust`. The same value either way, for every input and seed (a
/// property test below checks it against `xxh3_64_with_seed`).
#[inline]
pub fn hash_bytes(bytes: &[u8], seed: u64) -> u64 {
    match bytes.len() {
        9..=32 => xxh3_64_9_to_32(bytes, seed),
        _ => xxh3_64_with_seed(bytes, seed),
    }
}

/// XXH3's default secret, whose first 56 bytes its inputs of up to 32 bytes
/// read.
const SECRET: [u8; 192] = xxhash_rust::const_xxh3::const_custom_default_secret(0);

/// Little-endian `u64` at `at`, or 0 past the end (callers check sizes
/// first; this only keeps a wrong size from panicking). The segment
/// reader's too.
#[inline(always)]
pub(crate) fn le_u64(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
}

/// XXH3's 64 × 64 → 128-bit product folded to 64 bits.
#[inline(always)]
fn fold_product(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    product as u64 ^ (product >> 64) as u64
}

/// XXH3-64 of 9 to 32 bytes with `seed`, both of the specification's ways
/// for such inputs (9–16 bytes and 17–128) computed from the same four
/// words and the length choosing between them. Every read lies inside
/// `bytes`: a word a shorter input's way does not use is read from where
/// it lies (its value is then thrown away).
#[inline(always)]
fn xxh3_64_9_to_32(bytes: &[u8], seed: u64) -> u64 {
    const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
    let len = bytes.len();
    debug_assert!((9..=32).contains(&len));
    let first = le_u64(bytes, 0);
    let second = le_u64(bytes, 8.min(len - 8));
    let third = le_u64(bytes, len.saturating_sub(16));
    let last = le_u64(bytes, len - 8);
    // 9 to 16 bytes: the first and the last word.
    let low = first ^ (le_u64(&SECRET, 24) ^ le_u64(&SECRET, 32)).wrapping_add(seed);
    let high = last ^ (le_u64(&SECRET, 40) ^ le_u64(&SECRET, 48)).wrapping_sub(seed);
    let short = (len as u64).wrapping_add(low.swap_bytes()).wrapping_add(high).wrapping_add(fold_product(low, high));
    // 17 to 32 bytes: the first and the last 16.
    let mix16 = |a: u64, b: u64, at: usize| {
        fold_product(a ^ le_u64(&SECRET, at).wrapping_add(seed), b ^ le_u64(&SECRET, at + 8).wrapping_sub(seed))
    };
    let long =
        (len as u64).wrapping_mul(PRIME64_1).wrapping_add(mix16(first, second, 0)).wrapping_add(mix16(third, last, 16));
    let mut h = std::hint::select_unpredictable(len > 16, long, short);
    // XXH3's avalanche.
    h ^= h >> 37;
    h = h.wrapping_mul(0x1656_6791_9E37_79F9);
    h ^ (h >> 32)
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

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// `hash_bytes` is XXH3-64 for every length and seed, the lengths
        /// it hashes itself (9–32 bytes) and the ones on either side.
        #[test]
        fn hash_bytes_is_xxh3_64(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..48), seed: u64) {
            proptest::prop_assert_eq!(hash_bytes(&bytes, seed), xxh3_64_with_seed(&bytes, seed));
        }
    }

    /// Every length from 0 to 300 bytes, at six offsets of a buffer of
    /// varied bytes (a word of the 9–32-byte way read from the wrong place,
    /// or past the slice, where `le_u64` gives 0, changes a hash), and
    /// seeds at both ends of the range.
    #[test]
    fn hash_bytes_is_xxh3_64_at_every_length_and_offset() {
        let buffer: Vec<u8> = (0..340u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for seed in [0, 1, DEFAULT_HASH_SEED, u64::MAX] {
            for len in 0..=300 {
                for start in [0, 1, 7, 8, 15, 40] {
                    let bytes = &buffer[start..start + len];
                    assert_eq!(
                        hash_bytes(bytes, seed),
                        xxh3_64_with_seed(bytes, seed),
                        "{len} bytes at {start}, seed {seed}"
                    );
                }
            }
        }
    }
}
