//! SimHash (Charikar 2002; seed 001: "construct a random hyperplane ...
//! h(x) = sign(x · r)"). Each signature, permuted by a seeded hash, supplies
//! the ±1 coordinates of its projection on 64 random hyperplanes; a
//! document's weighted sum per hyperplane gives one bit by its sign.

use crate::hash::{derive_seed, hash_u64};

/// A 64-bit SimHash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SimHash(pub u64);

impl SimHash {
    /// The SimHash of `(signature hash, weight)` pairs; the weight is the
    /// signature's frequency in the multiset.
    pub fn new(weighted: impl IntoIterator<Item = (u64, u32)>, seed: u64) -> Self {
        let seed = derive_seed(seed, b"simhash");
        let mut sums = [0i64; 64];
        for (hash, weight) in weighted {
            let bits = hash_u64(hash, seed);
            let w = i64::from(weight);
            for (i, sum) in sums.iter_mut().enumerate() {
                if bits >> i & 1 == 1 {
                    *sum += w;
                } else {
                    *sum -= w;
                }
            }
        }
        SimHash(sums.iter().enumerate().fold(0, |acc, (i, &s)| if s > 0 { acc | 1 << i } else { acc }))
    }

    /// Number of differing bits.
    pub fn hamming(self, other: SimHash) -> u32 {
        (self.0 ^ other.0).count_ones()
    }

    /// The cosine-similarity estimate: two vectors at angle θ disagree on a
    /// random hyperplane with probability θ/π, so cos(π · hamming / 64).
    pub fn estimate_cosine(self, other: SimHash) -> f64 {
        (std::f64::consts::PI * f64::from(self.hamming(other)) / 64.0).cos()
    }
}
