//! Similarity measures, the one threshold comparison, and the length bounds
//! of the SpotSigs paper (§4.1, eq. 1–6) and its partitioning (§4.2).
//!
//! Every similarity here is a ratio of two integers ([`Overlap`]). Whether a
//! pair is similar enough is decided by [`Overlap::meets`] alone, in exact
//! integer arithmetic against a [`Threshold`] held in parts per billion, so
//! the index, the brute-force oracle and the tests cannot disagree on a
//! boundary case through floating-point rounding: `12/15 >= 0.8` is true
//! (it is false in `f64`, where 0.8 is slightly more than 4/5).

use std::fmt;

use crate::error::ConfigError;
use crate::vector::SignatureVector;

/// Which similarity a query or join uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Similarity {
    /// Multiset Jaccard, paper eq. 4: Σ min(freq) / Σ max(freq). The default.
    #[default]
    MultisetJaccard,
    /// Set Jaccard: |A ∩ B| / |A ∪ B| over distinct signatures.
    SetJaccard,
    /// Multiset containment of the query in the document:
    /// Σ min(freq) / |q|. Not symmetric.
    Containment,
}

impl Similarity {
    /// The length of a vector under this measure: the sum of frequencies for
    /// the multiset measures, the number of distinct signatures for sets.
    pub fn length(self, v: &SignatureVector) -> u64 {
        // Not `length_of(v.total(), v.distinct())`: the sum of frequencies
        // is a pass over the vector that set Jaccard does not need.
        match self {
            Similarity::MultisetJaccard | Similarity::Containment => v.total(),
            Similarity::SetJaccard => v.distinct(),
        }
    }

    /// [`Self::length`] of a vector whose sum of frequencies (`total`) and
    /// number of distinct signatures are known already.
    pub fn length_of(self, total: u64, distinct: u64) -> u64 {
        match self {
            Similarity::MultisetJaccard | Similarity::Containment => total,
            Similarity::SetJaccard => distinct,
        }
    }

    /// The similarity of `a` (the query, for containment) to `b`.
    pub fn overlap(self, a: &SignatureVector, b: &SignatureVector) -> Overlap {
        let (min_sum, shared) = intersect(a, b);
        self.of_intersection(min_sum, shared, (a.total(), a.distinct()), (b.total(), b.distinct()))
    }

    /// The similarity of `a` (the query, for containment) to `b` from their
    /// intersection (Σ min of frequencies, shared distinct signatures) and
    /// each one's (|x|, distinct count): the arithmetic of
    /// [`Similarity::overlap`], for callers that intersect stored vectors
    /// in place.
    pub(crate) fn of_intersection(self, min_sum: u64, shared: u64, a: (u64, u64), b: (u64, u64)) -> Overlap {
        match self {
            Similarity::MultisetJaccard => Overlap { num: min_sum, den: a.0 + b.0 - min_sum },
            Similarity::SetJaccard => Overlap { num: shared, den: a.1 + b.1 - shared },
            Similarity::Containment => Overlap { num: min_sum, den: a.0 },
        }
    }

    /// The smallest intersection (Σ min of frequencies under the weighing
    /// measures, shared distinct signatures under set Jaccard) with which
    /// `a` (the query, for containment) meets `tau` against `b`, each
    /// given as (|x|, distinct count); `None` when none can (not even the
    /// whole of the shorter). The similarity rises with the intersection,
    /// so a verification whose intersection can no longer reach it has
    /// failed. Exact: the closed form, then the one comparison of
    /// [`Overlap::meets`] on either side of it.
    pub(crate) fn least_intersection(self, tau: Threshold, a: (u64, u64), b: (u64, u64)) -> Option<u64> {
        let (la, lb) = match self {
            Similarity::SetJaccard => (a.1, b.1),
            Similarity::MultisetJaccard | Similarity::Containment => (a.0, b.0),
        };
        // Jaccard: v·S ≥ t·(la + lb − v) ⟺ v ≥ t·(la + lb) / (S + t);
        // containment: v·S ≥ t·la. In 64 bits when the product fits (a
        // 128-bit division is a call, and this runs once a verification).
        let (t, scale) = (u64::from(tau.0), Threshold::SCALE);
        let (numerator, denominator) = match self {
            Similarity::Containment => (u128::from(la), scale),
            _ => (u128::from(la) + u128::from(lb), scale + t),
        };
        let guess = match u64::try_from(numerator).ok().and_then(|n| n.checked_mul(t)) {
            Some(product) => u128::from(product.div_ceil(denominator)),
            None => (numerator * u128::from(t)).div_ceil(u128::from(denominator)),
        };
        let most = la.min(lb);
        let meets = |v: u64| self.of_intersection(v, v, a, b).meets(tau);
        let mut v = u64::try_from(guess).unwrap_or(u64::MAX).min(most.saturating_add(1));
        while v > 0 && meets(v - 1) {
            v -= 1;
        }
        while v <= most && !meets(v) {
            v += 1;
        }
        (v <= most).then_some(v)
    }

    /// The stable one-byte code used by the configuration encoding.
    pub(crate) fn code(self) -> u8 {
        match self {
            Similarity::MultisetJaccard => 1,
            Similarity::SetJaccard => 2,
            Similarity::Containment => 3,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Similarity::MultisetJaccard),
            2 => Some(Similarity::SetJaccard),
            3 => Some(Similarity::Containment),
            _ => None,
        }
    }
}

/// The threshold the command-line tool uses when none is given: the τ of
/// best F1 for the default configuration in the detection-quality
/// evaluation on real web pages (README, "Detection quality";
/// `cargo run --release --example quality`).
pub const DEFAULT_THRESHOLD: f64 = 0.4;

/// A similarity threshold τ in (0, 1], held as an integer number of parts
/// per billion (τ is rounded to 9 decimal places).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Threshold(u32);

impl Threshold {
    /// Parts per unit: a threshold is `ppb / SCALE`.
    pub const SCALE: u64 = 1_000_000_000;

    /// τ = 1: identical signature multisets only.
    pub const ONE: Threshold = Threshold(1_000_000_000);

    /// [`DEFAULT_THRESHOLD`] as a threshold.
    pub const DEFAULT: Threshold = Threshold((DEFAULT_THRESHOLD * 1e9) as u32);

    /// Validates τ.
    ///
    /// # Errors
    /// [`ConfigError::Threshold`] when τ is not a number in (0, 1], or rounds
    /// to zero parts per billion.
    pub fn new(tau: f64) -> Result<Self, ConfigError> {
        if !(tau > 0.0 && tau <= 1.0) {
            return Err(ConfigError::Threshold { value: tau });
        }
        let ppb = (tau * Self::SCALE as f64).round() as u32;
        if ppb == 0 {
            return Err(ConfigError::Threshold { value: tau });
        }
        Ok(Threshold(ppb))
    }

    /// A threshold from parts per billion.
    ///
    /// # Errors
    /// [`ConfigError::Threshold`] unless `1 <= ppb <= 1_000_000_000`.
    pub fn from_ppb(ppb: u32) -> Result<Self, ConfigError> {
        if ppb == 0 || u64::from(ppb) > Self::SCALE {
            return Err(ConfigError::Threshold { value: f64::from(ppb) / Self::SCALE as f64 });
        }
        Ok(Threshold(ppb))
    }

    /// Parts per billion.
    pub fn ppb(self) -> u32 {
        self.0
    }

    /// τ as a float (for display and for formulas that are estimates anyway).
    pub fn value(self) -> f64 {
        f64::from(self.0) / Self::SCALE as f64
    }
}

impl fmt::Debug for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Threshold({})", self.value())
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value())
    }
}

/// A similarity as the exact ratio `num / den`. `den == 0` (two documents
/// without signatures) is similarity 0: such documents match nothing; exact
/// duplicates among them are found by their fingerprints instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Overlap {
    /// Numerator: the (multi)set intersection size.
    pub num: u64,
    /// Denominator: the union size, or |q| for containment.
    pub den: u64,
}

impl Overlap {
    /// The similarity as a float in [0, 1].
    pub fn value(self) -> f64 {
        if self.den == 0 {
            0.0
        } else {
            self.num as f64 / self.den as f64
        }
    }

    /// The one comparison that decides `sim >= τ` everywhere, exactly:
    /// `num * 10^9 >= ppb(τ) * den` in 128-bit integers.
    #[inline]
    pub fn meets(self, tau: Threshold) -> bool {
        self.den != 0 && u128::from(self.num) * u128::from(Threshold::SCALE) >= u128::from(tau.0) * u128::from(self.den)
    }

    /// Orders two similarities by their exact values (`a/b` against `c/d`
    /// as `a·d` against `c·b`; `den == 0` counts as 0), for ranking.
    pub fn cmp_value(self, other: Overlap) -> std::cmp::Ordering {
        let exact = |o: Overlap| if o.den == 0 { (0, 1) } else { (u128::from(o.num), u128::from(o.den)) };
        let ((a, b), (c, d)) = (exact(self), exact(other));
        (a * d).cmp(&(c * b))
    }
}

/// Walks the two sorted vectors once and returns Σ min(freq) over the
/// intersection and the number of shared distinct hashes.
fn intersect(a: &SignatureVector, b: &SignatureVector) -> (u64, u64) {
    let (ah, af, bh, bf) = (a.hashes(), a.freqs(), b.hashes(), b.freqs());
    let (mut i, mut j) = (0, 0);
    let (mut min_sum, mut shared) = (0u64, 0u64);
    while i < ah.len() && j < bh.len() {
        match ah[i].cmp(&bh[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                min_sum += u64::from(af[i].min(bf[j]));
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    (min_sum, shared)
}

/// Multiset Jaccard (paper eq. 4). Σ max over the union is
/// |a| + |b| − Σ min over the intersection.
pub fn multiset_jaccard(a: &SignatureVector, b: &SignatureVector) -> Overlap {
    let (min_sum, _) = intersect(a, b);
    Overlap { num: min_sum, den: a.total() + b.total() - min_sum }
}

/// Set Jaccard over distinct signatures.
pub fn set_jaccard(a: &SignatureVector, b: &SignatureVector) -> Overlap {
    let (_, shared) = intersect(a, b);
    Overlap { num: shared, den: a.distinct() + b.distinct() - shared }
}

/// Multiset containment of `q` in `d`: Σ min(freq) / |q|.
pub fn containment(q: &SignatureVector, d: &SignatureVector) -> Overlap {
    let (min_sum, _) = intersect(q, d);
    Overlap { num: min_sum, den: q.total() }
}

/// Cosine similarity of the frequency vectors (what SimHash estimates).
pub fn cosine(a: &SignatureVector, b: &SignatureVector) -> f64 {
    let norm = |v: &SignatureVector| v.freqs().iter().map(|&f| f64::from(f) * f64::from(f)).sum::<f64>().sqrt();
    let (ah, af, bh, bf) = (a.hashes(), a.freqs(), b.hashes(), b.freqs());
    let (mut i, mut j, mut dot) = (0, 0, 0.0);
    while i < ah.len() && j < bh.len() {
        match ah[i].cmp(&bh[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                dot += f64::from(af[i]) * f64::from(bf[j]);
                i += 1;
                j += 1;
            }
        }
    }
    let denominator = norm(a) * norm(b);
    if denominator == 0.0 {
        0.0
    } else {
        dot / denominator
    }
}

/// The length bound of eq. 1, 2, 5 and 6: sim(a, b) ≤ min(|a|,|b|) / max(|a|,|b|)
/// for set and multiset Jaccard alike, with the lengths of the measure.
pub fn length_bound(len_a: u64, len_b: u64) -> Overlap {
    Overlap { num: len_a.min(len_b), den: len_a.max(len_b) }
}

/// The inclusive range of document lengths that can reach τ against a query
/// of length `query_len` (eq. 3): `[⌈τ·|q|⌉, ⌊|q|/τ⌋]` for Jaccard, and no
/// upper end for containment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthWindow {
    /// Smallest length that can match.
    pub min: u64,
    /// Largest length that can match (`u64::MAX` when unbounded).
    pub max: u64,
}

impl LengthWindow {
    /// The window for a query of length `query_len` under `measure`.
    pub fn new(measure: Similarity, query_len: u64, tau: Threshold) -> Self {
        let t = u128::from(tau.0);
        let scale = u128::from(Threshold::SCALE);
        let q = u128::from(query_len);
        let min = (t * q).div_ceil(scale) as u64;
        let max = match measure {
            Similarity::Containment => u64::MAX,
            _ => u64::try_from(q * scale / t).unwrap_or(u64::MAX),
        };
        LengthWindow { min, max }
    }

    /// Whether a document of length `len` lies in the window.
    pub fn contains(self, len: u64) -> bool {
        self.min <= len && len <= self.max
    }
}

/// The partition boundaries of §4.2 as a pure function of τ: `p0 = 1`, and
/// `p(k+1)` is the smallest integer above `p(k)` with
/// `p(k+1) − p(k) > (1 − τ)·p(k+1)`, that is `⌊p(k)/τ⌋ + 1`, while it is at
/// most `rho`. Partition `k` holds lengths `[p(k), p(k+1))`; the last one is
/// open-ended (`[p(last), ∞)`), the paper's extra partition for lengths past ρ.
///
/// In exact integers both of the paper's conditions hold: every length in
/// `[p(k), p(k+1))` is at most `⌊p(k)/τ⌋`, so any two lengths in one
/// partition have ratio ≥ τ (condition B); and a length `l` in partition `k`
/// reaches τ only against lengths up to `⌊l/τ⌋ ≤ ⌊(p(k+1)−1)/τ⌋ < p(k+2)`,
/// so similar lengths lie in the same or adjacent partitions (condition A).
/// `tests/similarity.rs` checks both by brute force.
pub fn partition_bounds(tau: Threshold, rho: u64) -> Vec<u64> {
    let t = u128::from(tau.0);
    let scale = u128::from(Threshold::SCALE);
    let mut bounds = vec![1u64];
    loop {
        let p = u128::from(*bounds.last().unwrap_or(&1));
        let next = p * scale / t + 1;
        if next > u128::from(rho) {
            return bounds;
        }
        bounds.push(next as u64);
    }
}

/// The index of the partition holding length `len` under `bounds` from
/// [`partition_bounds`] (lengths below 1 go to partition 0).
pub fn partition_of(bounds: &[u64], len: u64) -> usize {
    bounds.partition_point(|&p| p <= len).saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The least intersection is the smallest that meets τ, found by
        /// trying every one, under every measure.
        #[test]
        fn the_least_intersection_is_the_first_that_meets(
            ppb in proptest::prop_oneof![0u32..=1_000_000_000, 700_000_000u32..900_000_000],
            a in (0u64..400, 0u64..400),
            b in (0u64..400, 0u64..400),
        ) {
            let tau = Threshold::from_ppb(ppb).unwrap();
            for measure in [Similarity::MultisetJaccard, Similarity::SetJaccard, Similarity::Containment] {
                let most = match measure {
                    Similarity::SetJaccard => a.1.min(b.1),
                    _ => a.0.min(b.0),
                };
                let first = (0..=most).find(|&v| measure.of_intersection(v, v, a, b).meets(tau));
                proptest::prop_assert_eq!(measure.least_intersection(tau, a, b), first, "{:?}", measure);
            }
        }

        /// At lengths too large to try every intersection (where the
        /// closed form's product leaves 64 bits), the least one meets τ
        /// and the one below it does not.
        #[test]
        fn the_least_intersection_of_long_vectors_is_the_least(
            ppb in 1u32..=1_000_000_000,
            a in (1u64 << 20..1 << 62, 1u64 << 20..1 << 62),
            b in (1u64 << 20..1 << 62, 1u64 << 20..1 << 62),
        ) {
            let tau = Threshold::from_ppb(ppb).unwrap();
            for measure in [Similarity::MultisetJaccard, Similarity::SetJaccard, Similarity::Containment] {
                let meets = |v: u64| measure.of_intersection(v, v, a, b).meets(tau);
                match measure.least_intersection(tau, a, b) {
                    Some(v) => proptest::prop_assert!(meets(v) && (v == 0 || !meets(v - 1)), "{:?}: {}", measure, v),
                    None => {
                        let most = if measure == Similarity::SetJaccard { a.1.min(b.1) } else { a.0.min(b.0) };
                        proptest::prop_assert!(!meets(most), "{:?}", measure);
                    }
                }
            }
        }
    }
}
