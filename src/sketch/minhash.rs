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
    /// The first [`PROBES`] bins of each bin's probe sequence, bin after
    /// bin: the sequence depends on the bin alone, so an empty bin finds
    /// its donor without hashing in all but a few sketches.
    probes: Vec<u16>,
}

/// Probes of each bin's sequence kept in [`MinHasher`]'s table. A sketch
/// of `n` distinct hashes leaves a bin empty with probability about
/// e^(-n/P), and a probe finds an empty bin with the same probability, so
/// an empty bin of the default sketch (117 bins) of a page of 60 hashes
/// needs more than 16 probes with probability about 0.6^16 ≈ 3·10^-4; it
/// then goes on hashing where the table ends.
const PROBES: usize = 16;

/// A MinHash sketch: one value per bin.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MinHashSketch {
    values: Vec<u32>,
}

impl MinHasher {
    /// A hasher producing `permutations` values (at least 1) under the
    /// configuration `seed`.
    pub fn new(permutations: u32, seed: u64) -> Self {
        let mut hasher =
            MinHasher { permutations: permutations.max(1), seed: derive_seed(seed, b"minhash"), probes: Vec::new() };
        // Bins past u16 (more than the configuration allows) probe by hashing.
        if hasher.permutations <= 1 << 16 {
            let p = hasher.permutations as usize;
            let mut probes = Vec::with_capacity(p * PROBES);
            for i in 0..p {
                probes.extend((0..PROBES as u32).map(|attempt| hasher.probe(i, attempt) as u16));
            }
            hasher.probes = probes;
        }
        hasher
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
            values[bin] = values[bin].min((h as u32).min(EMPTY_BIN - 1));
        }
        // The bins filled before densification; an empty bin borrows from
        // one of them, never from a bin that borrowed. Which bins are empty
        // is a coin toss for a page's few dozen hashes, so they are listed
        // without a branch on it, and then filled.
        let filled: Vec<bool> = values.iter().map(|&v| v != EMPTY_BIN).collect();
        let mut empty = vec![0u32; p];
        let mut count = 0;
        for (i, &full) in filled.iter().enumerate() {
            // `count` is at most `i` here.
            empty[count] = i as u32;
            count += usize::from(!full);
        }
        for &i in &empty[..count] {
            values[i as usize] = values[self.donor(i as usize, &filled)];
        }
        MinHashSketch { values }
    }

    #[inline]
    fn bin_of(&self, h: u64) -> usize {
        (((h >> 32) * u64::from(self.permutations)) >> 32) as usize
    }

    /// Probe `attempt` of bin `i`'s sequence.
    #[inline]
    fn probe(&self, i: usize, attempt: u32) -> usize {
        let mut key = [0u8; 8];
        key[..4].copy_from_slice(&(i as u32).to_le_bytes());
        key[4..].copy_from_slice(&attempt.to_le_bytes());
        self.bin_of(xxh3_64_with_seed(&key, self.seed))
    }

    /// The non-empty bin an empty bin `i` borrows from: the first filled
    /// bin of its probe sequence, read from the table as far as it goes.
    fn donor(&self, i: usize, filled: &[bool]) -> usize {
        let p = filled.len();
        let tabled = self.probes.get(i * PROBES..(i + 1) * PROBES).unwrap_or(&[]);
        // Every tabled probe is tested, without a branch on the outcome
        // (which is a coin toss): bit k of `found` for probe k.
        let found =
            tabled.iter().enumerate().fold(0u32, |found, (k, &j)| found | u32::from(filled[usize::from(j)]) << k);
        if found != 0 {
            return usize::from(tabled[found.trailing_zeros() as usize]);
        }
        for attempt in tabled.len() as u32..64 * p as u32 {
            let j = self.probe(i, attempt);
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The densification as FORMAT.md states it, one hash per probe.
    fn reference(hasher: &MinHasher, hashes: &[u64]) -> Vec<u32> {
        let p = hasher.permutations as usize;
        let mut values = vec![EMPTY_BIN; p];
        if hashes.is_empty() {
            return values;
        }
        for &x in hashes {
            let h = hash_u64(x, hasher.seed);
            let bin = hasher.bin_of(h);
            values[bin] = values[bin].min((h as u32).min(EMPTY_BIN - 1));
        }
        let filled: Vec<bool> = values.iter().map(|&v| v != EMPTY_BIN).collect();
        for i in 0..p {
            if filled[i] {
                continue;
            }
            let mut donor = None;
            for attempt in 0..64 * p as u32 {
                let mut key = [0u8; 8];
                key[..4].copy_from_slice(&(i as u32).to_le_bytes());
                key[4..].copy_from_slice(&attempt.to_le_bytes());
                let j = hasher.bin_of(xxh3_64_with_seed(&key, hasher.seed));
                if filled[j] {
                    donor = Some(j);
                    break;
                }
            }
            let j = donor.unwrap_or_else(|| (1..=p).map(|step| (i + step) % p).find(|&j| filled[j]).unwrap_or(i));
            values[i] = values[j];
        }
        values
    }

    proptest! {
        // Few hashes in many bins: most bins are empty, and some probe
        // sequences run past the table (every branch of `donor`).
        #[test]
        fn the_probe_table_densifies_as_the_format_states(
            permutations in prop_oneof![1u32..8, 100u32..140, 1000u32..1100],
            hashes in proptest::collection::vec(any::<u64>(), 0..40),
            seed in any::<u64>(),
        ) {
            let hasher = MinHasher::new(permutations, seed);
            prop_assert_eq!(hasher.sketch(&hashes).values().to_vec(), reference(&hasher, &hashes));
        }
    }

    #[test]
    fn sequences_longer_than_the_table_are_followed() {
        // One hash in 1,000 bins: an empty bin's first 16 probes all miss
        // the one filled bin, except for a few bins.
        let hasher = MinHasher::new(1000, 7);
        let beyond =
            (0..1000).filter(|&i| (0..PROBES as u32).all(|a| hasher.probe(i, a) != hasher.probe(0, 0))).count();
        assert!(beyond > 900, "{beyond}");
        for x in 0..20u64 {
            assert_eq!(hasher.sketch(&[x]).values(), reference(&hasher, &[x]).as_slice());
        }
    }
}
