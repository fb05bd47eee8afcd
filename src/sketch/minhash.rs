//! MinHash by one-permutation hashing with optimal densification.
//!
//! Classic MinHash applies P independent permutations to every signature:
//! P·n hash evaluations. One-permutation hashing (Li, Owen and Zhang, 2012)
//! applies one permutation and splits its range into P bins, keeping the
//! minimum of each bin: n evaluations. Bins that no signature falls into
//! borrow the value of a non-empty bin chosen by a seeded probe sequence
//! that depends only on the bin's index ("optimal densification",
//! Shrivastava, ICML 2017). For two sets A and B, each bin then agrees with
//! probability J(A, B), as with classic MinHash, so the fraction of agreeing
//! bins is an unbiased estimate of Jaccard and the LSH S-curve applies.
//!
//! Layout, pinned by FORMAT.md: for a signature hash `x`,
//! `h = XXH3-64(x as u64 LE, seed_mh)`, bin `= ((h >> 32) · P) >> 32`,
//! value `= min(h mod 2^32, 2^32 − 2)`. An empty bin `i` probes bins
//! `j = ((XXH3-64(i as u32 LE ‖ a as u32 LE, seed_mh) >> 32) · P) >> 32` for
//! a = 0, 1, ... and takes the first non-empty one's value; after 64·P probes
//! it falls back to the next non-empty bin after `i`, cyclically.

use crate::hash::{derive_seed, hash_u64};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The value of every bin of the sketch of an empty set.
pub const EMPTY_BIN: u32 = u32::MAX;

/// Computes MinHash sketches of one size under one seed.
#[derive(Debug, Clone)]
pub struct MinHasher {
    permutations: u32,
    seed: u64,
}

/// A MinHash sketch: one value per bin.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MinHashSketch {
    values: Vec<u32>,
}

impl MinHasher {
    /// A hasher producing `permutations` values (at least 1) under the
    /// configuration `seed`.
    pub fn new(permutations: u32, seed: u64) -> Self {
        MinHasher { permutations: permutations.max(1), seed: derive_seed(seed, b"minhash") }
    }

    /// Number of values per sketch (P).
    pub fn permutations(&self) -> u32 {
        self.permutations
    }

    /// The sketch of a set of distinct signature hashes (repeats are
    /// harmless: they cannot change a minimum).
    pub fn sketch(&self, hashes: &[u64]) -> MinHashSketch {
        let p = self.permutations as usize;
        let mut values = vec![EMPTY_BIN; p];
        if hashes.is_empty() {
            return MinHashSketch { values };
        }
        for &x in hashes {
            let h = hash_u64(x, self.seed);
            let bin = self.bin_of(h);
            let value = (h as u32).min(EMPTY_BIN - 1);
            if value < values[bin] {
                values[bin] = value;
            }
        }
        let filled: Vec<bool> = values.iter().map(|&v| v != EMPTY_BIN).collect();
        if filled.iter().all(|&f| f) {
            return MinHashSketch { values };
        }
        for i in 0..p {
            if filled[i] {
                continue;
            }
            values[i] = values[self.donor(i, &filled)];
        }
        MinHashSketch { values }
    }

    #[inline]
    fn bin_of(&self, h: u64) -> usize {
        (((h >> 32) * u64::from(self.permutations)) >> 32) as usize
    }

    /// The non-empty bin an empty bin `i` borrows from.
    fn donor(&self, i: usize, filled: &[bool]) -> usize {
        let p = filled.len();
        let mut key = [0u8; 8];
        key[..4].copy_from_slice(&(i as u32).to_le_bytes());
        for attempt in 0..64 * p as u32 {
            key[4..].copy_from_slice(&attempt.to_le_bytes());
            let j = self.bin_of(xxh3_64_with_seed(&key, self.seed));
            if filled[j] {
                return j;
            }
        }
        (1..=p).map(|step| (i + step) % p).find(|&j| filled[j]).unwrap_or(i)
    }
}

impl MinHashSketch {
    /// Wraps stored values.
    pub fn from_values(values: Vec<u32>) -> Self {
        MinHashSketch { values }
    }

    /// The bin values.
    pub fn values(&self) -> &[u32] {
        &self.values
    }

    /// True for the sketch of an empty set.
    pub fn is_empty(&self) -> bool {
        self.values.iter().all(|&v| v == EMPTY_BIN)
    }

    /// The fraction of agreeing bins: an unbiased estimate of the Jaccard
    /// similarity of the two sets. 0 when either set was empty or the
    /// sketch sizes differ.
    pub fn estimate(&self, other: &MinHashSketch) -> f64 {
        if self.values.len() != other.values.len() || self.is_empty() || other.is_empty() {
            return 0.0;
        }
        let equal = self.values.iter().zip(&other.values).filter(|(a, b)| a == b).count();
        equal as f64 / self.values.len() as f64
    }
}
