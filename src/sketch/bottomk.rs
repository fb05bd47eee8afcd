//! Bottom-k sketches (seed 000, "sketch option 1"): the m smallest values
//! of a permutation of the signature set.

use crate::hash::{derive_seed, hash_u64};

/// The `m` smallest permuted hashes of a set, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BottomK {
    m: usize,
    values: Vec<u64>,
}

impl BottomK {
    /// The bottom-`m` sketch of a set of distinct signature hashes, under a
    /// permutation seeded from the configuration `seed`.
    pub fn new(hashes: &[u64], m: usize, seed: u64) -> Self {
        let seed = derive_seed(seed, b"bottomk");
        let mut values: Vec<u64> = hashes.iter().map(|&h| hash_u64(h, seed)).collect();
        values.sort_unstable();
        values.dedup();
        values.truncate(m);
        BottomK { m, values }
    }

    /// The sketch values, ascending.
    pub fn values(&self) -> &[u64] {
        &self.values
    }

    /// The unbiased resemblance estimator of seed 000:
    /// `|min_m(F(A) ∪ F(B)) ∩ F(A) ∩ F(B)| / |min_m(F(A) ∪ F(B))|`.
    /// 0 when both sets are empty or the sketch sizes differ.
    pub fn estimate(&self, other: &BottomK) -> f64 {
        if self.m != other.m {
            return 0.0;
        }
        let (a, b) = (&self.values, &other.values);
        let (mut i, mut j, mut taken, mut both) = (0, 0, 0usize, 0usize);
        while taken < self.m && (i < a.len() || j < b.len()) {
            match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) if x == y => {
                    both += 1;
                    i += 1;
                    j += 1;
                }
                (Some(x), Some(y)) if x < y => i += 1,
                (Some(_), None) => i += 1,
                _ => j += 1,
            }
            taken += 1;
        }
        if taken == 0 {
            0.0
        } else {
            both as f64 / taken as f64
        }
    }
}
