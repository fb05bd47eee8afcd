//! Mod-n sampling (seed 000 "sketch option 2", seed 003): keep the permuted
//! hashes that are 0 mod n.

use crate::hash::{derive_seed, hash_u64};

/// The permuted hashes of a set that are divisible by `n`, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModSample {
    n: u64,
    values: Vec<u64>,
}

impl ModSample {
    /// The mod-`n` sample (n ≥ 1) of a set of distinct signature hashes.
    pub fn new(hashes: &[u64], n: u64, seed: u64) -> Self {
        let n = n.max(1);
        let seed = derive_seed(seed, b"modn");
        let mut values: Vec<u64> = hashes.iter().map(|&h| hash_u64(h, seed)).filter(|v| v % n == 0).collect();
        values.sort_unstable();
        values.dedup();
        ModSample { n, values }
    }

    /// The sampled values, ascending.
    pub fn values(&self) -> &[u64] {
        &self.values
    }

    /// The resemblance estimator of seed 000: `|V(A) ∩ V(B)| / |V(A) ∪ V(B)|`.
    /// `None` when both samples are empty (nothing to estimate from) or the
    /// moduli differ.
    pub fn estimate(&self, other: &ModSample) -> Option<f64> {
        if self.n != other.n {
            return None;
        }
        let (a, b) = (&self.values, &other.values);
        let (mut i, mut j, mut both) = (0, 0, 0usize);
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    both += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        let union = a.len() + b.len() - both;
        (union > 0).then(|| both as f64 / union as f64)
    }
}
