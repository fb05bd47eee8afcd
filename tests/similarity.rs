//! Similarity measures against definitions computed from expanded
//! multisets, the exactness of the one threshold comparison, the soundness
//! of the length window, and the brute-force oracle's contract.

use std::collections::HashMap;

use neardex::oracle;
use neardex::similarity::{containment, length_bound, multiset_jaccard, set_jaccard, LengthWindow};
use neardex::{Overlap, SignatureVector, Similarity, Threshold};
use proptest::prelude::*;

/// A multiset over a small alphabet so that random documents overlap.
fn arb_vector() -> impl Strategy<Value = SignatureVector> {
    prop::collection::vec(0u64..24, 0..40).prop_map(SignatureVector::from_hashes)
}

fn counts(v: &SignatureVector) -> HashMap<u64, u64> {
    v.iter().map(|(h, f)| (h, u64::from(f))).collect()
}

/// Multiset Jaccard straight from eq. 4: Σ min over the intersection over
/// Σ max over the union.
fn eq4(a: &SignatureVector, b: &SignatureVector) -> (u64, u64) {
    let (ca, cb) = (counts(a), counts(b));
    let mut keys: Vec<u64> = ca.keys().chain(cb.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    let get = |c: &HashMap<u64, u64>, k| c.get(&k).copied().unwrap_or(0);
    let num = keys.iter().map(|&k| get(&ca, k).min(get(&cb, k))).sum();
    let den = keys.iter().map(|&k| get(&ca, k).max(get(&cb, k))).sum();
    (num, den)
}

fn arb_tau() -> impl Strategy<Value = Threshold> {
    (1u32..=1_000_000_000).prop_map(|ppb| Threshold::from_ppb(ppb).unwrap())
}

proptest! {
    #[test]
    fn vectors_count_every_hash_once_ascending(hashes in prop::collection::vec(0u64..24, 0..60), reuse in prop::collection::vec(any::<u64>(), 0..8)) {
        let mut expected: std::collections::BTreeMap<u64, u32> = std::collections::BTreeMap::new();
        for &h in &hashes {
            *expected.entry(h).or_default() += 1;
        }
        let from_vec = SignatureVector::from_hashes(hashes.clone());
        prop_assert_eq!(from_vec.iter().collect::<Vec<_>>(), expected.into_iter().collect::<Vec<_>>());
        // A reused buffer: only its live contents count, whatever it held.
        let mut buffer = reuse;
        buffer.clear();
        buffer.extend_from_slice(&hashes);
        prop_assert_eq!(&SignatureVector::from_hash_buffer(&mut buffer), &from_vec);
        prop_assert!(buffer.windows(2).all(|w| w[0] <= w[1]));
        prop_assert_eq!(from_vec.total(), hashes.len() as u64);
        // Its parts make it again; parts out of order, with a zero or of
        // different lengths make nothing.
        let (h, f) = (from_vec.hashes().to_vec(), from_vec.freqs().to_vec());
        let again = SignatureVector::from_sorted(h.clone(), f.clone());
        prop_assert_eq!(again.as_ref(), Some(&from_vec));
        if h.len() >= 2 {
            let mut swapped = h.clone();
            swapped.swap(0, 1);
            prop_assert!(SignatureVector::from_sorted(swapped, f.clone()).is_none());
            let mut repeated = h.clone();
            repeated[1] = repeated[0];
            prop_assert!(SignatureVector::from_sorted(repeated, f.clone()).is_none());
        }
        if !h.is_empty() {
            let mut zero = f.clone();
            zero[0] = 0;
            prop_assert!(SignatureVector::from_sorted(h.clone(), zero).is_none());
            prop_assert!(SignatureVector::from_sorted(h[1..].to_vec(), f).is_none());
        }
    }

    #[test]
    fn measures_match_their_definitions(a in arb_vector(), b in arb_vector()) {
        let m = multiset_jaccard(&a, &b);
        prop_assert_eq!((m.num, m.den), eq4(&a, &b));
        prop_assert_eq!(m, multiset_jaccard(&b, &a));
        let s = set_jaccard(&a, &b);
        prop_assert_eq!((s.num, s.den), eq4(&a.to_set(), &b.to_set()));
        let c = containment(&a, &b);
        prop_assert_eq!((c.num, c.den), (eq4(&a, &b).0, a.total()));
        // Identity: a non-empty document is 1.0 similar to itself.
        if !a.is_empty() {
            prop_assert!(multiset_jaccard(&a, &a).meets(Threshold::ONE));
        }
    }

    #[test]
    fn meets_is_the_exact_rational_comparison(num in 0u64..2000, extra in 0u64..2000, tau in arb_tau()) {
        let den = num + extra;
        let overlap = Overlap { num, den };
        // num/den >= ppb/1e9  <=>  num*1e9 >= ppb*den, cross-checked in f64 away from the boundary.
        let exact = den > 0 && (num as f64 / den as f64) >= tau.value();
        let lhs = num as i128 * 1_000_000_000 - i128::from(tau.ppb()) * den as i128;
        if lhs.abs() > den as i128 {
            prop_assert_eq!(overlap.meets(tau), exact);
        }
        prop_assert_eq!(overlap.meets(tau), den > 0 && lhs >= 0);
        // Monotone in τ.
        if overlap.meets(tau) && tau.ppb() > 1 {
            prop_assert!(overlap.meets(Threshold::from_ppb(tau.ppb() - 1).unwrap()));
        }
    }

    #[test]
    fn length_window_never_excludes_a_match(a in arb_vector(), b in arb_vector(), tau in arb_tau()) {
        for measure in [Similarity::MultisetJaccard, Similarity::SetJaccard, Similarity::Containment] {
            if measure.overlap(&a, &b).meets(tau) {
                let window = LengthWindow::new(measure, measure.length(&a), tau);
                prop_assert!(window.contains(measure.length(&b)), "{:?} {:?}", measure, window);
            }
        }
        let (la, lb) = (a.total(), b.total());
        if multiset_jaccard(&a, &b).meets(tau) {
            prop_assert!(length_bound(la, lb).meets(tau));
        }
    }

    #[test]
    fn self_join_equals_one_query_per_document(docs in prop::collection::vec(arb_vector(), 0..25), tau in arb_tau()) {
        let indexed: Vec<(u64, &SignatureVector)> = docs.iter().enumerate().map(|(i, d)| (i as u64 * 7 + 3, d)).collect();
        for measure in [Similarity::MultisetJaccard, Similarity::SetJaccard] {
            let pairs = oracle::self_join(&indexed, measure, tau);
            let mut expected = Vec::new();
            for &(id, d) in &indexed {
                for m in oracle::query(indexed.iter().copied(), d, measure, tau) {
                    if m.id > id {
                        expected.push((id, m.id, m.overlap));
                    }
                }
            }
            let got: Vec<_> = pairs.iter().map(|p| (p.a, p.b, p.overlap)).collect();
            prop_assert_eq!(got, expected);
        }
    }
}

#[test]
fn window_is_tight_at_both_ends() {
    let tau = Threshold::new(0.8).unwrap();
    let w = LengthWindow::new(Similarity::MultisetJaccard, 100, tau);
    assert_eq!((w.min, w.max), (80, 125));
    assert!(length_bound(80, 100).meets(tau) && !length_bound(79, 100).meets(tau));
    assert!(length_bound(100, 125).meets(tau) && !length_bound(100, 126).meets(tau));
    let c = LengthWindow::new(Similarity::Containment, 100, tau);
    assert_eq!((c.min, c.max), (80, u64::MAX));
}

#[test]
fn empty_documents_match_nothing() {
    let empty = SignatureVector::new();
    let doc = SignatureVector::from_hashes(vec![1, 2]);
    let tiny = Threshold::from_ppb(1).unwrap();
    assert!(!multiset_jaccard(&empty, &empty).meets(tiny));
    assert!(!multiset_jaccard(&empty, &doc).meets(tiny));
    assert!(oracle::query([(1, &empty)], &empty, Similarity::MultisetJaccard, tiny).is_empty());
}

#[test]
fn containment_join_reports_either_direction() {
    let small = SignatureVector::from_hashes(vec![1, 2]);
    let large = SignatureVector::from_hashes(vec![1, 2, 3, 4, 5, 6]);
    let tau = Threshold::new(0.9).unwrap();
    let pairs = oracle::self_join(&[(5, &large), (9, &small)], Similarity::Containment, tau);
    assert_eq!(pairs.len(), 1);
    assert_eq!((pairs[0].a, pairs[0].b), (5, 9));
    assert_eq!((pairs[0].overlap.num, pairs[0].overlap.den), (2, 2));
}

#[test]
fn overlaps_rank_by_their_exact_values() {
    use std::cmp::Ordering;
    let o = |num, den| neardex::Overlap { num, den };
    assert_eq!(o(4, 5).cmp_value(o(8, 10)), Ordering::Equal);
    assert_eq!(o(12, 15).cmp_value(o(4, 5)), Ordering::Equal);
    assert_eq!(o(2, 3).cmp_value(o(3, 5)), Ordering::Greater);
    assert_eq!(o(u64::MAX - 1, u64::MAX).cmp_value(o(1, 1)), Ordering::Less);
    // Documents without signatures count as similarity 0.
    assert_eq!(o(0, 0).cmp_value(o(0, 7)), Ordering::Equal);
    assert_eq!(o(0, 0).cmp_value(o(1, 9)), Ordering::Less);
}
