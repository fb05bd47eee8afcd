//! The brute-force oracle: a single threshold query and the all-pairs
//! self-join by comparing every pair, with the same [`Overlap::meets`] that
//! every exact path uses. Every later exact path (segments, pruning,
//! parallel joins) is tested against these functions; the CLI's
//! `--brute-force` flag lets users audit the index with them too.
//!
//! Quadratic by design: correctness is the only thing it optimises.

use crate::similarity::{Overlap, Similarity, Threshold};
use crate::vector::SignatureVector;

/// One match: the document's id and its similarity to the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    /// Document id.
    pub id: u64,
    /// The exact similarity.
    pub overlap: Overlap,
}

/// One near-duplicate pair, `a < b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// The smaller id.
    pub a: u64,
    /// The larger id.
    pub b: u64,
    /// The exact similarity (of `a` to `b` for containment).
    pub overlap: Overlap,
}

/// Every document in `docs` with `sim(query, d) ≥ τ`, in ascending id order.
pub fn query<'a>(
    docs: impl IntoIterator<Item = (u64, &'a SignatureVector)>,
    query: &SignatureVector,
    measure: Similarity,
    tau: Threshold,
) -> Vec<Match> {
    let mut out: Vec<Match> = docs
        .into_iter()
        .filter_map(|(id, d)| {
            let overlap = measure.overlap(query, d);
            overlap.meets(tau).then_some(Match { id, overlap })
        })
        .collect();
    out.sort_unstable_by_key(|m| m.id);
    out
}

/// Every pair of distinct documents with `sim ≥ τ`, each once as `(a, b)`
/// with `a < b`, sorted by `(a, b)`. For containment, a pair is reported
/// when either direction reaches τ, with the larger of the two similarities.
/// Ids must be unique.
pub fn self_join(docs: &[(u64, &SignatureVector)], measure: Similarity, tau: Threshold) -> Vec<Pair> {
    let mut out = Vec::new();
    for (i, &(id_i, di)) in docs.iter().enumerate() {
        for &(id_j, dj) in &docs[i + 1..] {
            let (a, b, da, db) = if id_i < id_j { (id_i, id_j, di, dj) } else { (id_j, id_i, dj, di) };
            let mut overlap = measure.overlap(da, db);
            if measure == Similarity::Containment {
                let reverse = measure.overlap(db, da);
                if reverse.meets(tau) && (!overlap.meets(tau) || reverse.value() > overlap.value()) {
                    overlap = reverse;
                }
            }
            if overlap.meets(tau) {
                out.push(Pair { a, b, overlap });
            }
        }
    }
    out.sort_unstable_by_key(|p| (p.a, p.b));
    out
}
