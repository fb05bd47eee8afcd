//! LSH banding over MinHash sketches (seed 004: "partition M into b bands
//! of r rows"), the choice of (b, r) for a threshold, and Broder's
//! super-shingles, of which band keys are the positional form.
//!
//! Band `t` of a sketch is values `t·r .. (t+1)·r`; its key is XXH3-64 of
//! those values as u32 little-endian under the seed
//! `derive_seed(seed, "band") + t` (wrapping). Two documents are LSH
//! candidates when any band key is equal. A sketch of an empty set has no
//! band keys, so documents without signatures are nobody's candidates.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::minhash::MinHashSketch;
use crate::error::ConfigError;
use crate::hash::derive_seed;

/// The probability that two documents of similarity `s` share at least one
/// of `b` bands of `r` rows: `1 − (1 − s^r)^b`.
pub fn s_curve(s: f64, bands: u32, rows: u32) -> f64 {
    1.0 - (1.0 - s.powi(rows as i32)).powi(bands as i32)
}

/// A banding of a MinHash sketch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LshParams {
    /// Number of bands, b.
    pub bands: u32,
    /// Rows per band, r.
    pub rows: u32,
}

impl LshParams {
    /// The (b, r) with b·r ≤ `max_permutations` that minimises
    /// `fp_weight · FP + fn_weight · FN`, where FP is the area under the
    /// S-curve below τ (pairs that should not be candidates but are) and FN
    /// the area above it beyond τ (pairs that should be but are not). The
    /// sketch then needs b·r permutations. Ties go to fewer permutations.
    ///
    /// # Errors
    /// [`ConfigError::Threshold`] for τ outside (0, 1];
    /// [`ConfigError::OutOfRange`] for `max_permutations == 0` or weights
    /// that are negative, not finite, or both zero.
    pub fn optimal(tau: f64, max_permutations: u32, fp_weight: f64, fn_weight: f64) -> Result<Self, ConfigError> {
        check_budget(tau, max_permutations)?;
        let weights_ok = |w: f64| w.is_finite() && w >= 0.0;
        if !weights_ok(fp_weight) || !weights_ok(fn_weight) || fp_weight + fn_weight == 0.0 {
            return Err(ConfigError::OutOfRange { parameter: "lsh error weights", value: 0, range: 0..=u64::MAX });
        }
        let best = least_cost(max_permutations, |p| {
            let fp = integrate(|s| p.probability(s), 0.0, tau);
            let fn_ = integrate(|s| 1.0 - p.probability(s), tau, 1.0);
            Some(fp_weight * fp + fn_weight * fn_)
        });
        Ok(best.unwrap_or(LshParams { bands: 1, rows: 1 }))
    }

    /// The (b, r) with b·r ≤ `max_permutations` under which a pair of
    /// similarity τ becomes a candidate with probability at least `recall`
    /// (`1 − (1 − τ^r)^b ≥ recall`; pairs above τ more often), with the
    /// least area under the S-curve below τ (the fewest candidates that
    /// verification will reject). Ties go to fewer permutations. For an
    /// LSH path that should miss few pairs at τ: at τ = 0.8 and P ≤ 128,
    /// `recall` 0.99 gives 16 bands of 6 rows.
    ///
    /// The probability is that of the MinHash estimate of the pair's *set*
    /// Jaccard: under multiset Jaccard or containment a pair at τ may have
    /// another set similarity.
    ///
    /// # Errors
    /// [`ConfigError::Threshold`] for τ outside (0, 1];
    /// [`ConfigError::OutOfRange`] for `max_permutations == 0`;
    /// [`ConfigError::LshRecall`] for `recall` outside (0, 1), or when no
    /// banding within `max_permutations` reaches it.
    pub fn for_recall(tau: f64, recall: f64, max_permutations: u32) -> Result<Self, ConfigError> {
        check_budget(tau, max_permutations)?;
        let unreachable = ConfigError::LshRecall { recall, tau, max_permutations };
        if !(recall > 0.0 && recall < 1.0) {
            return Err(unreachable);
        }
        let best = least_cost(max_permutations, |p| {
            (p.probability(tau) >= recall).then(|| integrate(|s| p.probability(s), 0.0, tau))
        });
        best.ok_or(unreachable)
    }

    /// The number of MinHash values this banding uses, b·r.
    pub fn permutations(self) -> u32 {
        self.bands * self.rows
    }

    /// The probability of becoming a candidate at similarity `s`.
    pub fn probability(self, s: f64) -> f64 {
        s_curve(s, self.bands, self.rows)
    }
}

/// τ in (0, 1] and a budget of at least one MinHash value.
fn check_budget(tau: f64, max_permutations: u32) -> Result<(), ConfigError> {
    crate::Threshold::new(tau)?;
    if max_permutations == 0 {
        return Err(ConfigError::OutOfRange {
            parameter: "max_permutations",
            value: 0,
            range: 1..=u64::from(u32::MAX),
        });
    }
    Ok(())
}

/// The banding with b·r ≤ `max_permutations` of the least `cost` (`None`:
/// not a candidate), ties to fewer permutations; `None` when no banding
/// is a candidate.
fn least_cost(max_permutations: u32, cost: impl Fn(LshParams) -> Option<f64>) -> Option<LshParams> {
    let mut best: Option<(f64, LshParams)> = None;
    for bands in 1..=max_permutations {
        for rows in 1..=max_permutations / bands {
            let params = LshParams { bands, rows };
            let Some(c) = cost(params) else { continue };
            let better = match best {
                None => true,
                Some((b, p)) => c < b - 1e-12 || ((c - b).abs() <= 1e-12 && bands * rows < p.bands * p.rows),
            };
            if better {
                best = Some((c, params));
            }
        }
    }
    best.map(|(_, p)| p)
}

/// Simpson's rule with 256 intervals; the integrands are smooth polynomials.
fn integrate(f: impl Fn(f64) -> f64, a: f64, b: f64) -> f64 {
    const N: usize = 256;
    if b <= a {
        return 0.0;
    }
    let h = (b - a) / N as f64;
    let mut sum = f(a) + f(b);
    for i in 1..N {
        let weight = if i % 2 == 1 { 4.0 } else { 2.0 };
        sum += weight * f(a + i as f64 * h);
    }
    sum * h / 3.0
}

/// The hash of each group of `group` consecutive sketch values, under
/// `seed + group index`. A trailing partial group is ignored.
fn group_keys(sketch: &MinHashSketch, group: u32, seed: u64) -> Vec<u64> {
    if sketch.is_empty() || group == 0 {
        return Vec::new();
    }
    let mut bytes = Vec::with_capacity(group as usize * 4);
    sketch
        .values()
        .chunks_exact(group as usize)
        .enumerate()
        .map(|(t, values)| {
            bytes.clear();
            for v in values {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            xxh3_64_with_seed(&bytes, seed.wrapping_add(t as u64))
        })
        .collect()
}

/// The LSH band keys of a sketch: one key per band, band `t` at index `t`.
pub fn band_keys(sketch: &MinHashSketch, params: LshParams, seed: u64) -> Vec<u64> {
    let used = params.permutations() as usize;
    if sketch.values().len() < used {
        return Vec::new();
    }
    let banded = MinHashSketch::from_values(sketch.values()[..used].to_vec());
    group_keys(&banded, params.rows, derive_seed(seed, b"band"))
}

/// Broder's super-shingles (DSC-SS; seed 003: "shingling the shingles"): the
/// MinHash sketch cut into groups of `group` values, each group hashed to
/// one super-shingle. Two documents of resemblance J agree on a given
/// super-shingle with probability J^group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperShingles {
    group: u32,
    keys: Vec<u64>,
}

impl SuperShingles {
    /// The super-shingles of `sketch` in groups of `group` values.
    pub fn new(sketch: &MinHashSketch, group: u32, seed: u64) -> Self {
        SuperShingles { group, keys: group_keys(sketch, group, derive_seed(seed, b"supershingle")) }
    }

    /// The super-shingle hashes, in group order.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// Whether the two documents share a super-shingle (the DSC-SS test for
    /// "probably near-duplicates").
    pub fn shares_any(&self, other: &SuperShingles) -> bool {
        self.keys.iter().zip(&other.keys).any(|(a, b)| a == b)
    }

    /// Resemblance estimate: the fraction f of agreeing super-shingles
    /// estimates J^group, so J ≈ f^(1/group). Consistent (it converges as
    /// the sketch grows), not unbiased.
    pub fn estimate(&self, other: &SuperShingles) -> f64 {
        if self.keys.is_empty() || self.keys.len() != other.keys.len() || self.group != other.group {
            return 0.0;
        }
        let equal = self.keys.iter().zip(&other.keys).filter(|(a, b)| a == b).count();
        (equal as f64 / self.keys.len() as f64).powf(1.0 / f64::from(self.group))
    }
}
