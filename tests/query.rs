//! The pruned exact query against the brute-force oracle: random corpora and
//! thresholds for every similarity, after deletes, flushes, merges and
//! reopen; the paper's Algorithm 1 counterexample; all real pages of
//! ../shared/data; and the LSH query's contract.

#[path = "common/cases.rs"]
mod cases;
mod common;

use neardex::oracle;
use neardex::sketch::{band_keys, MinHasher};
use neardex::store::{Document, Index, IndexOptions, Metadata, Pruning, WarmUp};
use neardex::{DocumentSignature, Fingerprint, SignatureConfig, SignatureVector, Signer, Similarity, Threshold};
use proptest::prelude::*;

/// A document signature for a hand-made vector, with the sketches the
/// configuration would give it.
fn signature_of(config: &SignatureConfig, vector: SignatureVector, n: u64) -> DocumentSignature {
    let minhash = MinHasher::new(config.minhash.permutations, config.hash_seed).sketch(vector.hashes());
    let band_keys = band_keys(&minhash, config.minhash.lsh(), config.hash_seed);
    DocumentSignature { vector, fingerprint: Fingerprint(u128::from(n)), minhash, band_keys }
}

fn config_with(similarity: Similarity) -> SignatureConfig {
    SignatureConfig { similarity, ..SignatureConfig::default() }
}

/// §4.3 read literally would skip {b:6}: list a (document frequency 1) is
/// processed first, δ1 = 2, then in list b δ1 + δ2 = 2 + 4 > (1 − 0.5)·10.
/// Its similarity to q = {a:2, b:8} is 6/10.
#[test]
fn the_literal_line_18_counterexample_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let config = SignatureConfig::default();
    let index =
        Index::create_with(dir.path(), config.clone(), IndexOptions { flush_threshold: 1, ..IndexOptions::default() })
            .unwrap();
    let (a, b, c) = (1u64, 2u64, 3u64);
    let docs = [
        SignatureVector::from_pairs([(b, 6)]),
        SignatureVector::from_pairs([(b, 1), (c, 9)]),
        SignatureVector::from_pairs([(a, 1), (c, 1)]),
    ];
    let mut w = index.writer().unwrap();
    for (n, v) in docs.iter().enumerate() {
        w.insert(
            &format!("d{n}"),
            Document::Signatures(&signature_of(&config, v.clone(), n as u64)),
            Metadata::default(),
        )
        .unwrap();
    }
    w.commit().unwrap();
    assert_eq!(index.stats().unwrap().pending, 0, "all in a segment");
    let q = SignatureVector::from_pairs([(a, 2), (b, 8)]);
    let s = index.searcher().unwrap();
    let (found, stats) = s.query_with(&q, Threshold::new(0.5).unwrap(), Pruning::Full).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].overlap.num, found[0].overlap.den), (6, 10));
    assert_eq!(s.get_by_id(found[0].id).unwrap().unwrap().key, "d0");
    assert!(stats.candidates_verified >= 1);
}

fn arb_vector() -> impl Strategy<Value = SignatureVector> {
    prop_oneof![
        1 => Just(SignatureVector::new()),
        6 => prop::collection::vec((0u64..30, 1u32..4), 1..12).prop_map(SignatureVector::from_pairs),
        1 => prop::collection::vec((0u64..200, 1u32..3), 40..120).prop_map(SignatureVector::from_pairs),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    Delete(usize),
    Flush,
    Optimize,
    Reopen,
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0usize..40).prop_map(Step::Delete),
        1 => Just(Step::Flush),
        1 => Just(Step::Optimize),
        1 => Just(Step::Reopen),
    ]
}

proptest! {
    #![proptest_config(cases::proptest_cases(32))]

    #[test]
    fn query_equals_the_oracle(
        docs in prop::collection::vec(arb_vector(), 1..40),
        duplicates in prop::collection::vec(0usize..40, 0..10),
        steps in prop::collection::vec(arb_step(), 0..6),
        queries in prop::collection::vec(arb_vector(), 1..4),
        taus in prop::collection::vec(prop_oneof![Just(1_000_000_000u32), 1u32..=1_000_000_000], 1..4),
        measure in prop_oneof![Just(Similarity::MultisetJaccard), Just(Similarity::SetJaccard), Just(Similarity::Containment)],
        flush_threshold in 1usize..20,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = config_with(measure);
        let options = IndexOptions { flush_threshold, ..IndexOptions::default() };
        let mut index = Some(Index::create_with(dir.path(), config.clone(), options).unwrap());
        let mut corpus = docs.clone();
        corpus.extend(duplicates.iter().map(|&i| docs[i % docs.len()].clone()));
        let mut live: Vec<Option<SignatureVector>> = Vec::new();
        {
            let idx = index.as_ref().unwrap();
            for chunk in corpus.chunks(7) {
                let mut w = idx.writer().unwrap();
                for v in chunk {
                    let n = live.len();
                    w.insert(&format!("k{n}"), Document::Signatures(&signature_of(&config, v.clone(), n as u64)), Metadata::default()).unwrap();
                    live.push(Some(v.clone()));
                }
                w.commit().unwrap();
            }
        }
        for step in steps {
            let idx = index.as_ref().unwrap();
            match step {
                Step::Delete(i) => {
                    let i = i % live.len();
                    let mut w = idx.writer().unwrap();
                    w.delete(&format!("k{i}")).unwrap();
                    w.commit().unwrap();
                    live[i] = None;
                }
                Step::Flush => idx.flush().unwrap(),
                Step::Optimize => idx.optimize().unwrap(),
                Step::Reopen => {
                    drop(index.take());
                    index = Some(Index::open_with(dir.path(), options).unwrap());
                }
            }
        }
        let idx = index.as_ref().unwrap();
        let s = idx.searcher().unwrap();
        // Document ids are assigned 1, 2, ... in insertion order.
        let expected_docs: Vec<(u64, &SignatureVector)> =
            live.iter().enumerate().filter_map(|(i, v)| v.as_ref().map(|v| (i as u64 + 1, v))).collect();
        let mut all_queries = queries.clone();
        all_queries.extend(corpus.iter().take(3).cloned());
        for q in &all_queries {
            for &ppb in &taus {
                let tau = Threshold::from_ppb(ppb).unwrap();
                let expected = oracle::query(expected_docs.iter().copied(), q, measure, tau);
                let (full, full_stats) = s.query_with(q, tau, Pruning::Full).unwrap();
                let (window, window_stats) = s.query_with(q, tau, Pruning::WindowOnly).unwrap();
                let (none, none_stats) = s.query_with(q, tau, Pruning::None).unwrap();
                prop_assert_eq!(&full, &expected, "τ = {}, {:?}", tau, measure);
                prop_assert_eq!(&window, &expected);
                prop_assert_eq!(&none, &expected);
                prop_assert!(full_stats.postings_read <= window_stats.postings_read);
                prop_assert!(window_stats.postings_read <= none_stats.postings_read);
                prop_assert!(full_stats.candidates_verified <= none_stats.candidates_verified);
                // Top-k (one pass with a rising threshold): the oracle's
                // answer sorted by similarity, then id, cut at k.
                let mut ranked = expected.clone();
                ranked.sort_by(|x, y| y.overlap.cmp_value(x.overlap).then(x.id.cmp(&y.id)));
                for k in [1usize, 2, 5] {
                    let top = s.top_k(q, k, tau).unwrap();
                    prop_assert_eq!(&top[..], &ranked[..k.min(ranked.len())], "top-{} at τ = {}", k, tau);
                }
                // LSH, against brute force: exactly the matches that
                // share a band (same band, same key) with the query.
                let signature = signature_of(&config, q.clone(), 0);
                let shares_a_band = |id: u64| {
                    let doc = &expected_docs.iter().find(|(d, _)| *d == id).unwrap().1;
                    let keys = signature_of(&config, (*doc).clone(), id).band_keys;
                    keys.iter().zip(&signature.band_keys).any(|(a, b)| a == b)
                };
                let lsh_expected: Vec<_> = expected.iter().filter(|m| shares_a_band(m.id)).cloned().collect();
                prop_assert_eq!(s.query_lsh(&signature, tau).unwrap(), lsh_expected, "LSH at τ = {}", tau);
            }
        }
    }
}

/// All 1,562 real pages in one index (two segments and a delta), a sample
/// of them as queries at several τ: zero differences from the oracle, and
/// the pruning visibly saves work.
#[test]
fn real_pages_at_several_thresholds() {
    let Some(data) = common::shared_data() else { return };
    let pages = common::all_pages(&data);
    let dir = tempfile::tempdir().unwrap();
    let config = SignatureConfig::default();
    let signer = Signer::new(config.clone()).unwrap();
    let index = Index::create_with(
        dir.path(),
        config.clone(),
        IndexOptions { flush_threshold: 400, ..IndexOptions::default() },
    )
    .unwrap();
    let mut vectors = Vec::new();
    for chunk in pages.chunks(500) {
        let mut w = index.writer().unwrap();
        for page in chunk {
            let signature = signer.sign_html(&page.html);
            let outcome = w.insert(&page.name, Document::Signatures(&signature), Metadata::default()).unwrap();
            vectors.push((outcome.id, signature.vector));
        }
        w.commit().unwrap();
    }
    let stats = index.stats().unwrap();
    assert!(stats.segments >= 2 && stats.pending > 0, "{stats:?}");
    let s = index.searcher().unwrap();
    let docs: Vec<(u64, &SignatureVector)> = vectors.iter().map(|(id, v)| (*id, v)).collect();
    let (mut full_read, mut none_read, mut matches, mut skipped) = (0, 0, 0, 0);
    for tau in [0.3, 0.5, 0.8, 0.9, 1.0] {
        let tau = Threshold::new(tau).unwrap();
        for (_, q) in vectors.iter().step_by(13) {
            let expected = oracle::query(docs.iter().copied(), q, Similarity::MultisetJaccard, tau);
            let (got, full) = s.query_with(q, tau, Pruning::Full).unwrap();
            assert_eq!(got, expected);
            let (_, none) = s.query_with(q, tau, Pruning::None).unwrap();
            full_read += full.postings_read;
            none_read += none.postings_read;
            skipped += full.lists_skipped;
            assert_eq!(none.lists_skipped, 0, "without pruning every list is looked up");
            matches += got.len();
        }
    }
    // A page given as HTML, as text or as signatures: the answer for its
    // vector, which includes the page itself.
    for (page, (id, vector)) in pages.iter().zip(&vectors).step_by(97) {
        let tau = Threshold::new(0.5).unwrap();
        let expected = s.query(vector, tau).unwrap();
        assert!(vector.is_empty() || expected.iter().any(|m| m.id == *id), "{}", page.name);
        let text = neardex::text::html_bytes_to_text(&page.html);
        let signature = signer.sign_text(&text);
        for document in [Document::Html(&page.html), Document::Text(&text), Document::Signatures(&signature)] {
            assert_eq!(s.query_document(document, tau).unwrap(), expected, "{}", page.name);
        }
    }
    println!(
        "real pages: {matches} matches; postings read with pruning {full_read}, without {none_read}; \
         segment look-ups skipped {skipped}"
    );
    assert!(full_read * 2 < none_read, "pruning should at least halve the postings read");
    assert!(skipped > 0, "the δ1 break should spare look-ups");
}

/// `Searcher::warm_up`, directories only and with the pages mapped in, on a
/// fresh read-only open of an on-disk index (segments not yet looked up,
/// and a delta) changes no answer: queries and the self-join equal the
/// oracle with either warm-up, twice over, and without one.
#[test]
fn warm_up_changes_no_answer() {
    let dir = tempfile::tempdir().unwrap();
    let config = SignatureConfig::default();
    let options = IndexOptions { flush_threshold: 120, ..IndexOptions::default() };
    let index = Index::create_with(dir.path(), config.clone(), options).unwrap();
    // Documents over a small alphabet, so that lists are shared and many
    // pairs are near-duplicates; a fixed generator keeps the test stable.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |bound: u64| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % bound
    };
    let mut vectors = Vec::new();
    for n in 0..400u64 {
        let base = next(40) * 5;
        let pairs: Vec<(u64, u32)> =
            (0..10 + next(3)).map(|i| (base + i * 3 + u64::from(next(8) == 0), 1 + u32::from(next(6) == 0))).collect();
        vectors.push(SignatureVector::from_pairs(pairs));
        if n % 50 == 49 {
            let mut w = index.writer().unwrap();
            for (i, v) in vectors.iter().enumerate().skip(n as usize - 49) {
                let signature = signature_of(&config, v.clone(), i as u64);
                w.insert(&i.to_string(), Document::Signatures(&signature), Metadata::default()).unwrap();
            }
            w.commit().unwrap();
        }
    }
    let stats = index.stats().unwrap();
    assert!(stats.segments >= 2 && stats.pending > 0, "{stats:?}");
    drop(index);
    let index = Index::open_read_only(dir.path()).unwrap();
    let ids: Vec<u64> =
        (0..vectors.len()).map(|i| index.searcher().unwrap().get(&i.to_string()).unwrap().unwrap().id).collect();
    let docs: Vec<(u64, &SignatureVector)> = ids.iter().copied().zip(&vectors).collect();
    let tau = Threshold::new(0.6).unwrap();
    let expected_pairs = oracle::self_join(&docs, Similarity::MultisetJaccard, tau);
    assert!(expected_pairs.len() > 50, "the corpus should have near-duplicates: {}", expected_pairs.len());
    for warm_up in [None, Some(WarmUp::Directories), Some(WarmUp::Pages), Some(WarmUp::Directories)] {
        let index = Index::open_read_only(dir.path()).unwrap();
        let s = index.searcher().unwrap();
        for _ in 0..2 {
            if let Some(warm_up) = warm_up {
                s.warm_up(warm_up);
            }
            for t in [0.3, 0.8, 1.0] {
                let t = Threshold::new(t).unwrap();
                for q in vectors.iter().step_by(7) {
                    let expected = oracle::query(docs.iter().copied(), q, Similarity::MultisetJaccard, t);
                    assert_eq!(s.query(q, t).unwrap(), expected, "{warm_up:?}");
                }
            }
            let mut pairs = Vec::new();
            s.self_join(tau, |p| pairs.push(p)).unwrap();
            pairs.sort_unstable_by_key(|p| (p.a, p.b));
            assert_eq!(pairs, expected_pairs, "{warm_up:?}");
        }
    }
}

/// Connected components of `pairs` over `ids`, the slow obvious way.
fn components(ids: &[u64], pairs: &[(u64, u64)]) -> Vec<Vec<u64>> {
    let mut cluster_of: std::collections::BTreeMap<u64, u64> = ids.iter().map(|&i| (i, i)).collect();
    loop {
        let mut changed = false;
        for &(a, b) in pairs {
            let (ca, cb) = (cluster_of[&a], cluster_of[&b]);
            if ca != cb {
                let low = ca.min(cb);
                for c in cluster_of.values_mut() {
                    if *c == ca || *c == cb {
                        *c = low;
                    }
                }
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut groups: std::collections::BTreeMap<u64, Vec<u64>> = std::collections::BTreeMap::new();
    for (id, c) in cluster_of {
        groups.entry(c).or_default().push(id);
    }
    groups.into_values().filter(|g| g.len() > 1).collect()
}

proptest! {
    #![proptest_config(cases::proptest_cases(32))]

    #[test]
    fn self_join_and_clusters_equal_the_oracle(
        docs in prop::collection::vec(arb_vector(), 1..60),
        deletes in prop::collection::vec(0usize..60, 0..8),
        ppb in prop_oneof![Just(1_000_000_000u32), 1u32..=1_000_000_000],
        set in any::<bool>(),
        flush_threshold in 1usize..30,
    ) {
        let measure = if set { Similarity::SetJaccard } else { Similarity::MultisetJaccard };
        let dir = tempfile::tempdir().unwrap();
        let config = config_with(measure);
        let index = Index::create_with(dir.path(), config.clone(), IndexOptions { flush_threshold, ..IndexOptions::default() }).unwrap();
        let mut live: Vec<Option<SignatureVector>> = docs.iter().cloned().map(Some).collect();
        for (chunk_no, chunk) in docs.chunks(9).enumerate() {
            let mut w = index.writer().unwrap();
            for (i, v) in chunk.iter().enumerate() {
                let n = chunk_no * 9 + i;
                w.insert(&format!("k{n}"), Document::Signatures(&signature_of(&config, v.clone(), n as u64)), Metadata::default()).unwrap();
            }
            w.commit().unwrap();
        }
        let mut w = index.writer().unwrap();
        for d in deletes {
            let d = d % docs.len();
            w.delete(&format!("k{d}")).unwrap();
            live[d] = None;
        }
        w.commit().unwrap();
        let tau = Threshold::from_ppb(ppb).unwrap();
        let expected_docs: Vec<(u64, &SignatureVector)> =
            live.iter().enumerate().filter_map(|(i, v)| v.as_ref().map(|v| (i as u64 + 1, v))).collect();
        let expected = oracle::self_join(&expected_docs, measure, tau);
        let s = index.searcher().unwrap();
        let mut got = Vec::new();
        s.self_join(tau, |p| got.push(p)).unwrap();
        // The documented order: by the shorter document of each pair (the
        // smaller id between equal lengths) in (length, id) order, then by
        // the other document's id.
        let length: std::collections::HashMap<u64, u64> =
            expected_docs.iter().map(|&(id, v)| (id, measure.length(v))).collect();
        let mut in_order = expected.clone();
        in_order.sort_by_key(|p| {
            let (short, other) = if (length[&p.a], p.a) <= (length[&p.b], p.b) { (p.a, p.b) } else { (p.b, p.a) };
            (length[&short], short, other)
        });
        prop_assert_eq!(&got, &in_order);
        // The bounded self-join: with memory to spare, the self-join's own
        // run; its deferring run in blocks of 48 bytes (a few vectors).
        let mut bounded = Vec::new();
        s.self_join_within(tau, neardex::store::Searcher::LEAST_MAPPED, |p| bounded.push(p)).unwrap();
        prop_assert_eq!(&bounded, &in_order);
        let mut deferred = Vec::new();
        neardex::fuzz_support::self_join_deferred(&s, tau, 48, |p| deferred.push(p)).unwrap();
        prop_assert_eq!(&deferred, &in_order);
        let ids: Vec<u64> = expected_docs.iter().map(|d| d.0).collect();
        let pairs: Vec<(u64, u64)> = expected.iter().map(|p| (p.a, p.b)).collect();
        let clusters = s.clusters(tau).unwrap();
        let got_members: Vec<Vec<u64>> = clusters.iter().map(|c| c.members.clone()).collect();
        prop_assert_eq!(got_members, components(&ids, &pairs));
        for c in &clusters {
            prop_assert_eq!(c.representative, c.members[0]);
        }
        prop_assert_eq!(s.clusters_within(tau, neardex::store::Searcher::LEAST_MAPPED).unwrap(), clusters);
    }
}

#[test]
fn self_join_under_containment_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::create(dir.path(), config_with(Similarity::Containment)).unwrap();
    let searcher = index.searcher().unwrap();
    let err = searcher.self_join(Threshold::ONE, |_| {}).unwrap_err();
    assert!(matches!(err, neardex::store::IndexError::Unsupported { .. }), "{err}");
    let err = searcher.self_join_within(Threshold::ONE, 1 << 30, |_| {}).unwrap_err();
    assert!(matches!(err, neardex::store::IndexError::Unsupported { .. }), "{err}");
}

/// `self_join` bounds itself only for an index larger than the memory
/// available (the choice itself: `budget.rs`'s unit tests); an index that
/// fits is joined whole.
#[test]
fn a_join_maps_the_whole_index_while_it_fits_in_memory() {
    let available = neardex::store::available_memory();
    if cfg!(target_os = "linux") {
        assert!(available.is_some_and(|bytes| bytes > 0), "MemAvailable is read on Linux: {available:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = config_with(Similarity::SetJaccard);
    let index = Index::create(dir.path(), config.clone()).unwrap();
    let mut w = index.writer().unwrap();
    for n in 0..20u64 {
        let v = SignatureVector::from_pairs((0..30).map(|h| (h + n / 2 * 1000, 1)));
        w.insert(&format!("k{n}"), Document::Signatures(&signature_of(&config, v, n)), Metadata::default()).unwrap();
    }
    w.commit().unwrap();
    index.flush().unwrap();
    let searcher = index.searcher().unwrap();
    assert!(searcher.segment_bytes() > 0);
    assert_eq!(searcher.join_memory(), None);
    let mut pairs = Vec::new();
    searcher.self_join(Threshold::ONE, |p| pairs.push((p.a, p.b))).unwrap();
    assert_eq!(pairs.len(), 10, "the ten pairs of equal vectors: {pairs:?}");
}

/// One step of an `insert_if_new` workload.
#[derive(Debug, Clone)]
enum IfNewOp {
    /// `insert_if_new` of a vector over a small alphabet (so that many
    /// reach τ), under a fresh key.
    IfNew(Vec<(u64, u32)>),
    /// A plain insert, which `insert_if_new` must see afterwards.
    Insert(Vec<(u64, u32)>),
    /// `insert_batch_if_new` of these vectors, each under a fresh key but
    /// those marked to take the key of a live document (a taken key).
    Batch(Vec<(Vec<(u64, u32)>, bool)>),
    /// Delete the live document at this position (modulo their count).
    Delete(usize),
    /// Commit and open a new writer.
    Commit,
}

fn arb_if_new_op() -> impl Strategy<Value = IfNewOp> {
    let vector = prop::collection::vec((0u64..12, 1u32..4), 0..6);
    prop_oneof![
        5 => vector.clone().prop_map(IfNewOp::IfNew),
        2 => vector.clone().prop_map(IfNewOp::Insert),
        2 => prop::collection::vec((vector, prop::bool::weighted(0.1)), 0..8).prop_map(IfNewOp::Batch),
        1 => any::<usize>().prop_map(IfNewOp::Delete),
        1 => Just(IfNewOp::Commit),
    ]
}

proptest! {
    #![proptest_config(cases::proptest_cases(32))]

    /// `insert_if_new` refuses exactly when a live document (committed,
    /// pending or in a segment, or staged by this writer; not deleted)
    /// reaches τ, and its matches are those documents, as brute force over
    /// a model finds them, whatever the mix of staged, flushed, deleted and
    /// plainly inserted documents.
    #[test]
    fn insert_if_new_matches_brute_force(ops in prop::collection::vec(arb_if_new_op(), 1..60), tau in 0.2f64..=1.0) {
        use neardex::store::InsertIfNew;
        let dir = tempfile::tempdir().unwrap();
        let config = SignatureConfig::default();
        let options = IndexOptions { flush_threshold: 3, ..IndexOptions::default() };
        let index = Index::create_with(dir.path(), config.clone(), options).unwrap();
        let tau = Threshold::new(tau).unwrap();
        // Live documents: key, id, vector.
        let mut live: Vec<(String, u64, SignatureVector)> = Vec::new();
        let mut writer = Some(index.writer().unwrap());
        for (n, op) in ops.into_iter().enumerate() {
            let w = writer.as_mut().unwrap();
            let key = format!("k{n}");
            match op {
                IfNewOp::IfNew(pairs) => {
                    let vector = SignatureVector::from_pairs(pairs);
                    let expected = oracle::query(live.iter().map(|(_, id, v)| (*id, v)), &vector, config.similarity, tau);
                    let signature = signature_of(&config, vector.clone(), n as u64);
                    match w.insert_if_new(&key, Document::Signatures(&signature), Metadata::default(), tau).unwrap() {
                        InsertIfNew::Inserted(outcome) => {
                            prop_assert!(expected.is_empty(), "inserted past {expected:?}");
                            live.push((key, outcome.id, vector));
                        }
                        InsertIfNew::Matches(found) => {
                            // The writer names them, staged or committed.
                            for m in &found {
                                let info = w.describe(m.id).unwrap().expect("a match is described");
                                prop_assert!(live.iter().any(|(k, id, _)| *id == m.id && *k == info.key));
                            }
                            prop_assert_eq!(found, expected);
                        }
                    }
                }
                IfNewOp::Batch(members) => {
                    // Each member's expected result, as one insert_if_new
                    // after another would give it.
                    let mut documents = Vec::new();
                    for (i, (pairs, taken)) in members.into_iter().enumerate() {
                        let vector = SignatureVector::from_pairs(pairs);
                        let key = match live.first() {
                            Some((k, ..)) if taken => k.clone(),
                            _ => format!("{key}-{i}"),
                        };
                        documents.push((key, vector.clone(), signature_of(&config, vector, (n * 100 + i) as u64)));
                    }
                    let batch = documents.iter().map(|(k, _, s)| (k.as_str(), Document::Signatures(s), Metadata::default()));
                    let results = w.insert_batch_if_new(batch, tau);
                    prop_assert_eq!(results.len(), documents.len());
                    for ((key, vector, _), result) in documents.into_iter().zip(results) {
                        let expected = oracle::query(live.iter().map(|(_, id, v)| (*id, v)), &vector, config.similarity, tau);
                        match result {
                            Ok(InsertIfNew::Inserted(outcome)) => {
                                prop_assert!(expected.is_empty(), "inserted past {expected:?}");
                                prop_assert!(!live.iter().any(|(k, ..)| *k == key), "{key} was taken");
                                live.push((key, outcome.id, vector));
                            }
                            Ok(InsertIfNew::Matches(found)) => prop_assert_eq!(found, expected),
                            Err(neardex::store::IndexError::DuplicateKey { key: taken }) => {
                                prop_assert!(expected.is_empty(), "matches are checked before the key");
                                prop_assert!(live.iter().any(|(k, ..)| *k == taken));
                            }
                            Err(e) => prop_assert!(false, "{e}"),
                        }
                    }
                }
                IfNewOp::Insert(pairs) => {
                    let vector = SignatureVector::from_pairs(pairs);
                    let signature = signature_of(&config, vector.clone(), n as u64);
                    let outcome = w.insert(&key, Document::Signatures(&signature), Metadata::default()).unwrap();
                    live.push((key, outcome.id, vector));
                }
                IfNewOp::Delete(at) => {
                    if !live.is_empty() {
                        let (key, ..) = live.remove(at % live.len());
                        prop_assert!(w.delete(&key).unwrap());
                    }
                }
                IfNewOp::Commit => {
                    writer.take().unwrap().commit().unwrap();
                    writer = Some(index.writer().unwrap());
                }
            }
        }
    }
}

#[test]
fn insert_if_new_top_k_and_explain() {
    use neardex::store::InsertIfNew;
    let dir = tempfile::tempdir().unwrap();
    let config = SignatureConfig::default();
    let index =
        Index::create_with(dir.path(), config.clone(), IndexOptions { flush_threshold: 2, ..IndexOptions::default() })
            .unwrap();
    let tau = Threshold::new(0.6).unwrap();
    let v = |pairs: &[(u64, u32)]| SignatureVector::from_pairs(pairs.iter().copied());
    let base = v(&[(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)]);
    let near = v(&[(1, 1), (2, 1), (3, 1), (4, 1), (6, 1)]); // 4/6 to base
    let far = v(&[(7, 1), (8, 1)]);
    let mut w = index.writer().unwrap();
    let sig = |vector: &SignatureVector, n| signature_of(&config, vector.clone(), n);
    let first = w.insert_if_new("base", Document::Signatures(&sig(&base, 1)), Metadata::default(), tau).unwrap();
    assert!(matches!(first, InsertIfNew::Inserted(_)));
    // Staged in this very writer: still seen.
    match w.insert_if_new("near", Document::Signatures(&sig(&near, 2)), Metadata::default(), tau).unwrap() {
        InsertIfNew::Matches(m) => assert_eq!((m.len(), m[0].overlap.num, m[0].overlap.den), (1, 4, 6)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        w.insert_if_new("far", Document::Signatures(&sig(&far, 3)), Metadata::default(), tau).unwrap(),
        InsertIfNew::Inserted(_)
    ));
    w.commit().unwrap(); // flushes: committed documents are found in segments too
    let mut w = index.writer().unwrap();
    assert!(matches!(
        w.insert_if_new("near", Document::Signatures(&sig(&near, 2)), Metadata::default(), tau).unwrap(),
        InsertIfNew::Matches(_)
    ));
    // Deleted in this writer: no longer blocks.
    w.delete("base").unwrap();
    assert!(matches!(
        w.insert_if_new("near", Document::Signatures(&sig(&near, 2)), Metadata::default(), tau).unwrap(),
        InsertIfNew::Inserted(_)
    ));
    w.insert("base2", Document::Signatures(&sig(&base, 4)), Metadata::default()).unwrap();
    w.commit().unwrap();

    let s = index.searcher().unwrap();
    let top = s.top_k(&base, 2, Threshold::new(0.1).unwrap()).unwrap();
    let keys: Vec<String> = top.iter().map(|m| s.get_by_id(m.id).unwrap().unwrap().key).collect();
    assert_eq!(keys, ["base2", "near"], "1.0 before 4/6");
    assert_eq!(s.top_k(&base, 10, Threshold::new(0.9).unwrap()).unwrap().len(), 1);

    let e = s.explain("near", "base2").unwrap().unwrap();
    assert_eq!(e.shared, [(1, 1, 1), (2, 1, 1), (3, 1, 1), (4, 1, 1)]);
    assert_eq!((e.lengths, e.overlap.num, e.overlap.den), ((5, 5), 4, 6));
    assert!(s.explain("near", "missing").unwrap().is_none());
}

/// The delta's postings are shared by the snapshots of one flush cycle and
/// grow with every commit: a snapshot taken earlier must still answer
/// exactly for its own documents (not later inserts, and deleted or
/// replaced ones as they were), by the exact and the LSH query alike.
#[test]
fn snapshots_keep_their_delta_answers() {
    let dir = tempfile::tempdir().unwrap();
    let config = SignatureConfig::default();
    let index = Index::create_with(
        dir.path(),
        config.clone(),
        IndexOptions { flush_threshold: 1_000, ..IndexOptions::default() },
    )
    .unwrap();
    let vector = |n: u64| SignatureVector::from_hashes((0..30).map(|i| i * 7 + n % 3 * 1000).collect());
    let insert = |from: u64, to: u64| {
        let mut w = index.writer().unwrap();
        for n in from..to {
            w.insert(&format!("k{n}"), Document::Signatures(&signature_of(&config, vector(n), n)), Metadata::default())
                .unwrap();
        }
        w.commit().unwrap();
    };
    insert(0, 10);
    let tau = Threshold::new(0.9).unwrap();
    let query = signature_of(&config, vector(0), 0);
    let answer = |s: &neardex::store::Searcher| {
        let exact: Vec<u64> = s.query(&query.vector, tau).unwrap().iter().map(|m| m.id).collect();
        let lsh: Vec<u64> = s.query_lsh(&query, tau).unwrap().iter().map(|m| m.id).collect();
        (exact, lsh)
    };
    let before = index.searcher().unwrap();
    let first = answer(&before);
    assert_eq!(first.0, vec![1, 4, 7, 10], "documents 0, 3, 6, 9 have the query's vector");
    assert_eq!(first.1, first.0, "identical vectors share every band key");
    insert(10, 20);
    let mut w = index.writer().unwrap();
    w.delete("k3").unwrap();
    w.commit().unwrap();
    let mut w = index.writer().unwrap();
    w.insert("k6", Document::Signatures(&signature_of(&config, vector(1), 6)), Metadata::default()).unwrap_err();
    w.delete("k6").unwrap();
    w.commit().unwrap();
    assert_eq!(answer(&before), first, "the old snapshot answers as it did");
    let after = answer(&index.searcher().unwrap());
    assert_eq!(after.0, vec![1, 10, 13, 16, 19]);
    assert_eq!(after.1, after.0);
    index.flush().unwrap();
    assert_eq!(answer(&before), first);
    assert_eq!(answer(&index.searcher().unwrap()), after);
}

/// The recall audit counts matches other than the query's own document:
/// with one band of 64 rows, documents sharing 60% of their signatures are
/// exact matches at τ = 0.5 that LSH almost never finds, and an exact copy
/// is found by both.
#[test]
fn lsh_recall_audit_counts_other_matches() {
    let dir = tempfile::tempdir().unwrap();
    let config = SignatureConfig {
        minhash: neardex::MinHashConfig { permutations: 64, bands: 1, rows: 64 },
        ..config_with(Similarity::SetJaccard)
    };
    let index = Index::create(dir.path(), config.clone()).unwrap();
    // Pairs (2k, 2k+1) share 150 of 200 signatures each: Jaccard 150/250.
    let vector =
        |base: u64, shift: u64| SignatureVector::from_pairs((base + shift..base + shift + 200).map(|h| (h, 1)));
    let mut w = index.writer().unwrap();
    for k in 0..20u64 {
        let base = k * 10_000;
        for (n, v) in [(2 * k, vector(base, 0)), (2 * k + 1, vector(base, 50))] {
            w.insert(&format!("d{n}"), Document::Signatures(&signature_of(&config, v, n)), Metadata::default())
                .unwrap();
        }
    }
    // And an exact copy of d0.
    w.insert("copy", Document::Signatures(&signature_of(&config, vector(0, 0), 99)), Metadata::default()).unwrap();
    w.commit().unwrap();
    let s = index.searcher().unwrap();
    let tau = Threshold::new(0.5).unwrap();
    let ids: Vec<u64> = s.live_ids().unwrap();
    let audit = s.lsh_recall_audit(&ids, tau).unwrap();
    assert_eq!(audit.queries, 41);
    // 20 pairs seen from both sides, and d0 and its copy match each other
    // and d1: 40 + 2 + 2.
    assert_eq!(audit.exact_matches, 44);
    assert!(audit.lsh_matches >= 2, "the copy and d0 share every band: {audit:?}");
    assert!(audit.lsh_matches < audit.exact_matches / 2, "one 64-row band misses most pairs: {audit:?}");
    assert!(audit.recall() < 0.5);
}

/// A vector of `n` signatures with hashes that no other document draws
/// (random 64-bit values), frequencies 1 to 3.
fn arb_unique_vector() -> impl Strategy<Value = SignatureVector> {
    prop::collection::vec((any::<u64>(), 1u32..4), 8..24).prop_map(SignatureVector::from_pairs)
}

proptest! {
    #![proptest_config(cases::proptest_cases(32))]

    /// Near-duplicate pairs whose signatures only the two of them hold,
    /// split between two segments or between a segment and the pending
    /// documents: the self-join must see that such a signature is shared
    /// (it skips the look-ups of the signatures no other document holds),
    /// whichever sources hold the two copies.
    #[test]
    fn self_join_finds_pairs_that_hold_their_signatures_alone(
        originals in prop::collection::vec(arb_unique_vector(), 2..30),
        copies in prop::collection::vec((0usize..30, 0usize..24, any::<u64>(), 0u8..3), 1..20),
        set in any::<bool>(),
        ppb in 500_000_000u32..=1_000_000_000,
    ) {
        let measure = if set { Similarity::SetJaccard } else { Similarity::MultisetJaccard };
        let (_dir, index, config) = index_flushed_by_hand(measure);
        // Stage 0 and 1 end in a flush (two segments), stage 2 stays pending.
        let mut docs: Vec<(SignatureVector, u8)> = originals.iter().map(|v| (v.clone(), 0)).collect();
        for &(of, drop, hash, stage) in &copies {
            docs.push((near_copy(&originals[of % originals.len()], drop, hash), stage));
        }
        let (s, ids) = insert_by_stage(&index, &config, &docs, 3);
        let indexed: Vec<(u64, &SignatureVector)> = ids.iter().copied().zip(docs.iter().map(|d| &d.0)).collect();
        let tau = Threshold::from_ppb(ppb).unwrap();
        let (got, expected) = join_and_oracle(&s, &indexed, measure, tau);
        prop_assert_eq!(got, expected);
    }

    /// Pages of hundreds of signatures, near-duplicates within a segment
    /// and across three segments and the pending documents, with
    /// signatures common to many of them in every segment: a probe's order
    /// then reads its signatures in blocks, and stops reading once those
    /// read reach the cut with look-ups in one segment at most (the rest
    /// left unprocessed). Its pairs, bounded or not, are the oracle's.
    #[test]
    fn self_join_of_long_pages_across_segments_equals_the_oracle(
        originals in prop::collection::vec((150usize..400, 0u64..1 << 20), 2..8),
        copies in prop::collection::vec((0usize..8, 2usize..40, 0u8..4), 1..12),
        set in any::<bool>(),
        ppb in 600_000_000u32..=950_000_000,
    ) {
        let measure = if set { Similarity::SetJaccard } else { Similarity::MultisetJaccard };
        let (_dir, index, config) = index_flushed_by_hand(measure);
        // Signatures spread over the hash space as real ones are (the
        // join's filters pick their words by the top bits): a bijection.
        let spread = |x: u64| x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
        // Each original: signatures of its own, and a fifth from 60 that
        // every page draws from (lists in every segment).
        let page = |k: usize, len: usize, seed: u64| {
            SignatureVector::from_pairs((0..len as u64).map(|i| {
                let common = (seed.wrapping_mul(0x9E37_79B9) ^ i.wrapping_mul(0xBF58_476D)).is_multiple_of(5);
                let hash = if common { 0xC0_0000 + (seed + i) % 60 } else { (k as u64 + 1) << 32 | i };
                (spread(hash), 1 + u32::from(i % 7 == 0))
            }))
        };
        let mut docs: Vec<(SignatureVector, u8)> =
            originals.iter().enumerate().map(|(k, &(len, seed))| (page(k, len, seed), (k % 4) as u8)).collect();
        for (c, &(of, every, stage)) in copies.iter().enumerate() {
            // Every `every`-th signature replaced by one nobody else holds.
            let original = &docs[of % originals.len()].0;
            let pairs = original.iter().enumerate().map(|(i, (hash, freq))| {
                if i % every == 0 { (spread(0xD0_0000_0000 + (c * 1000 + i) as u64), 1) } else { (hash, freq) }
            });
            docs.push((SignatureVector::from_pairs(pairs.collect::<Vec<_>>()), stage));
        }
        // Stages 0 to 2 end in a flush (three segments), stage 3 stays
        // pending.
        let (s, ids) = insert_by_stage(&index, &config, &docs, 4);
        let indexed: Vec<(u64, &SignatureVector)> = ids.iter().copied().zip(docs.iter().map(|d| &d.0)).collect();
        let tau = Threshold::from_ppb(ppb).unwrap();
        let (got, expected) = join_and_oracle(&s, &indexed, measure, tau);
        prop_assert_eq!(&got, &expected);
        let mut bounded = Vec::new();
        neardex::fuzz_support::self_join_deferred(&s, tau, 4096, |p| bounded.push(p)).unwrap();
        bounded.sort_unstable_by_key(|p| (p.a, p.b));
        prop_assert_eq!(bounded, expected);
    }

    /// In one segment with nothing pending (after `optimize`), the
    /// self-join's shared signatures and held-last counts come from that
    /// segment's keys alone, exactly: its pairs are still the oracle's,
    /// with near-duplicates holding signatures only the two of them hold,
    /// and deleted documents still listed in the segment (up to a quarter
    /// of them).
    #[test]
    fn self_join_in_one_segment_equals_the_oracle(
        originals in prop::collection::vec(arb_unique_vector(), 2..30),
        copies in prop::collection::vec((0usize..30, 0usize..24, any::<u64>()), 1..20),
        deletes in prop::collection::vec(0usize..50, 0..5),
        set in any::<bool>(),
        ppb in 500_000_000u32..=1_000_000_000,
    ) {
        let measure = if set { Similarity::SetJaccard } else { Similarity::MultisetJaccard };
        let (_dir, index, config) = index_flushed_by_hand(measure);
        let mut docs: Vec<SignatureVector> = originals.clone();
        for &(of, drop, hash) in &copies {
            docs.push(near_copy(&originals[of % originals.len()], drop, hash));
        }
        // Two flushes, then one segment of both.
        let mut n = 0;
        for half in docs.chunks(docs.len().div_ceil(2)) {
            let mut w = index.writer().unwrap();
            for vector in half {
                n += 1;
                let signature = signature_of(&config, vector.clone(), n - 1);
                w.insert(&(n - 1).to_string(), Document::Signatures(&signature), Metadata::default()).unwrap();
            }
            w.commit().unwrap();
            index.flush().unwrap();
        }
        index.optimize().unwrap();
        let mut live = vec![true; docs.len()];
        let mut w = index.writer().unwrap();
        for d in deletes {
            let d = d % docs.len();
            w.delete(&d.to_string()).unwrap();
            live[d] = false;
        }
        w.commit().unwrap();
        // One segment, or none when every document was deleted (a segment
        // with more than a quarter deleted is rewritten without them).
        let stats = index.stats().unwrap();
        prop_assert!(stats.segments <= 1 && stats.pending == 0, "{stats:?}");
        let s = index.searcher().unwrap();
        let mut indexed = Vec::new();
        for (n, vector) in docs.iter().enumerate().filter(|&(n, _)| live[n]) {
            indexed.push((s.get(&n.to_string()).unwrap().unwrap().id, vector));
        }
        let tau = Threshold::from_ppb(ppb).unwrap();
        let (got, expected) = join_and_oracle(&s, &indexed, measure, tau);
        prop_assert_eq!(got, expected);
    }

    /// The self-join looks a shared signature up only in the segments its
    /// masks name, one bit per segment position modulo 8: with eleven
    /// segments, three bits stand for two segments each. Near-duplicates
    /// spread over all of them, some pairs holding a signature only the two
    /// of them hold, are found as the oracle finds them.
    #[test]
    fn self_join_across_more_segments_than_mask_bits(
        originals in prop::collection::vec(arb_unique_vector(), 11..30),
        copies in prop::collection::vec((0usize..30, 0usize..24, any::<u64>(), 0usize..11), 1..30),
        set in any::<bool>(),
        ppb in 500_000_000u32..=1_000_000_000,
    ) {
        let measure = if set { Similarity::SetJaccard } else { Similarity::MultisetJaccard };
        let (_dir, index, config) = index_flushed_by_hand(measure);
        // Original n goes to segment n mod 11; each copy (one signature
        // replaced by one nobody else holds) to the segment it names.
        let mut docs: Vec<(SignatureVector, usize)> =
            originals.iter().enumerate().map(|(n, v)| (v.clone(), n % 11)).collect();
        for &(of, drop, hash, segment) in &copies {
            docs.push((near_copy(&originals[of % originals.len()], drop, hash), segment));
        }
        // Segments 0–3 get ten or more documents (padding of their own),
        // the rest fewer than eight: two tiers of the merge policy, neither
        // with eight segments, so all eleven stay.
        for segment in 0..11 {
            let mut w = index.writer().unwrap();
            let mut held = 0;
            for (n, (vector, _)) in docs.iter().enumerate().filter(|(_, d)| d.1 == segment) {
                let signature = signature_of(&config, vector.clone(), n as u64);
                w.insert(&n.to_string(), Document::Signatures(&signature), Metadata::default()).unwrap();
                held += 1;
            }
            let padding = if segment < 4 { 10usize.saturating_sub(held) } else { 0 };
            for p in 0..padding {
                let vector = SignatureVector::from_pairs(vec![(0xFACE_0000 + (segment * 16 + p) as u64, 1)]);
                let signature = signature_of(&config, vector, 10_000 + (segment * 16 + p) as u64);
                w.insert(&format!("pad-{segment}-{p}"), Document::Signatures(&signature), Metadata::default()).unwrap();
            }
            w.commit().unwrap();
            index.flush().unwrap();
        }
        let s = index.searcher().unwrap();
        let segments = index.stats().unwrap().segments;
        prop_assume!(segments > 8, "only {} segments", segments);
        let mut indexed: Vec<(u64, SignatureVector)> = Vec::new();
        s.for_each_live(|id, v| indexed.push((id, v.clone()))).unwrap();
        let indexed: Vec<(u64, &SignatureVector)> = indexed.iter().map(|(id, v)| (*id, v)).collect();
        let tau = Threshold::from_ppb(ppb).unwrap();
        let (got, expected) = join_and_oracle(&s, &indexed, measure, tau);
        // Single queries with the snapshot's segment masks (built by the
        // pages warm-up), bits standing for two segments included: their
        // signatures visited fewest segments first. Stored pages, and the
        // same pages with signatures no segment holds (those come first
        // in that order), as threshold and top-k queries.
        s.warm_up(WarmUp::Pages);
        for (n, (_, q)) in indexed.iter().enumerate().step_by(3) {
            let novel = near_copy(&near_copy(q, n, 0xDEAD_0000 + n as u64), n + 1, 0xBEEF_0000 + n as u64);
            for q in [*q, &novel] {
                let wanted = oracle::query(indexed.iter().copied(), q, measure, tau);
                let mut ranked = wanted.clone();
                ranked.sort_by(|x, y| y.overlap.cmp_value(x.overlap).then(x.id.cmp(&y.id)));
                prop_assert_eq!(s.query(q, tau).unwrap(), wanted);
                prop_assert_eq!(s.top_k(q, 2, tau).unwrap(), &ranked[..2.min(ranked.len())]);
            }
        }
        // A case without a pair checks only that the join finds none (it
        // was rejected, but a rejection counts against proptest's limit of
        // 1,024: PROPTEST_CASES=20000 aborted after 6,252 cases, a seventh
        // of them without a pair).
        prop_assert_eq!(got, expected);
    }

    /// Single queries over two to six segments with the snapshot's masks
    /// built skip the look-ups, in one segment, of signatures whose list
    /// there they know (`QueryStats::lists_known`): a document of it found
    /// through two of its signatures holds them, and the filter of
    /// signatures with lists of several rules them out. Near-duplicates in
    /// the same segment (lists of several), in other segments (looked up
    /// there) and pending, deleted documents, a segment appended after the
    /// masks (which their filter does not cover), stored pages, copies no
    /// segment holds, threshold and top-k queries: every answer the
    /// oracle's, under every measure.
    #[test]
    fn queries_that_know_a_signature_s_holder_equal_the_oracle(
        originals in prop::collection::vec(arb_unique_vector(), 2..30),
        copies in prop::collection::vec((0usize..30, 0usize..24, any::<u64>(), 0usize..7, 0u8..3), 1..30),
        segments in 2usize..7,
        deletes in prop::collection::vec(0usize..60, 0..6),
        measure in 0u8..3,
        ppb in 400_000_000u32..=1_000_000_000,
    ) {
        let measure = [Similarity::MultisetJaccard, Similarity::SetJaccard, Similarity::Containment][measure as usize];
        let (_dir, index, config) = index_flushed_by_hand(measure);
        // Original n in segment n mod `segments`; each copy in the segment
        // it names, or pending (the stage past the last segment).
        let mut docs: Vec<(SignatureVector, usize)> =
            originals.iter().enumerate().map(|(n, v)| (v.clone(), n % segments)).collect();
        // A copy is a near-duplicate (one signature replaced) or part of
        // its original (three signatures of four: every fourth left out, or
        // the lowest quarter by hash, the first its queries look up), and
        // one of its own: the original then holds the rest alone, so queries
        // of it know their holder, while the part it shares is held in the
        // copy's segment too, or beside it in a list of several.
        for &(of, drop, hash, stage, part) in &copies {
            let original = &originals[of % originals.len()];
            let copy = match part {
                0 => near_copy(original, drop, hash),
                1 => part_copy(original, |i, _| i % 4 != 0, hash),
                _ => part_copy(original, |i, n| i >= n / 4, hash),
            };
            docs.push((copy, stage % (segments + 1)));
        }
        for stage in 0..=segments {
            let mut w = index.writer().unwrap();
            for (n, (vector, _)) in docs.iter().enumerate().filter(|(_, d)| d.1 == stage) {
                let signature = signature_of(&config, vector.clone(), n as u64);
                w.insert(&n.to_string(), Document::Signatures(&signature), Metadata::default()).unwrap();
            }
            w.commit().unwrap();
            if stage < segments {
                index.flush().unwrap();
            }
        }
        let mut live = vec![true; docs.len()];
        let mut w = index.writer().unwrap();
        for d in deletes {
            let d = d % docs.len();
            w.delete(&d.to_string()).unwrap();
            live[d] = false;
        }
        w.commit().unwrap();
        let tau = Threshold::from_ppb(ppb).unwrap();
        let s = index.searcher().unwrap();
        s.warm_up(WarmUp::Pages);
        check_queries(&s, &docs, &live, measure, tau)?;
        // Then a segment of copies appended: the next snapshot shares the
        // masks and their filter, which do not cover the new segment.
        let mut w = index.writer().unwrap();
        for (of, (vector, _)) in docs.clone().iter().enumerate().take(4) {
            let copy = part_copy(vector, |i, _| i % 3 != 1, 0xFEED_0000 + of as u64);
            let n = docs.len();
            let signature = signature_of(&config, copy.clone(), n as u64);
            w.insert(&n.to_string(), Document::Signatures(&signature), Metadata::default()).unwrap();
            docs.push((copy, segments + 1));
            live.push(true);
        }
        w.commit().unwrap();
        index.flush().unwrap();
        let s = index.searcher().unwrap();
        check_queries(&s, &docs, &live, measure, tau)?;
    }
}

/// Every document of `docs` and a near-copy of each no segment holds,
/// queried through `s` at `tau`, as threshold and top-k queries: the
/// oracle's answers over the live ones.
fn check_queries(
    s: &neardex::store::Searcher,
    docs: &[(SignatureVector, usize)],
    live: &[bool],
    measure: Similarity,
    tau: Threshold,
) -> Result<(), TestCaseError> {
    let mut indexed = Vec::new();
    for (n, (vector, _)) in docs.iter().enumerate().filter(|&(n, _)| live[n]) {
        indexed.push((s.get(&n.to_string()).unwrap().unwrap().id, vector));
    }
    for (n, (vector, _)) in docs.iter().enumerate() {
        let novel = near_copy(vector, n, 0xC0FF_EE00_0000 + n as u64);
        for q in [vector, &novel] {
            let wanted = oracle::query(indexed.iter().copied(), q, measure, tau);
            prop_assert_eq!(s.query(q, tau).unwrap(), wanted.clone());
            let mut ranked = wanted;
            ranked.sort_by(|x, y| y.overlap.cmp_value(x.overlap).then(x.id.cmp(&y.id)));
            prop_assert_eq!(s.top_k(q, 2, tau).unwrap(), &ranked[..2.min(ranked.len())]);
        }
    }
    Ok(())
}

/// Three segments: a page with a near-duplicate beside it and another in
/// the next segment, and pages no other document shares a signature
/// with. With the masks built, a query of one of the latter knows the
/// holder of the signatures it would look up and finds what the oracle
/// finds; the page whose every signature a copy holds knows none, and
/// finds its copies as before.
#[test]
fn a_query_knows_the_holder_of_signatures_one_page_alone_holds() {
    let measure = Similarity::SetJaccard;
    let (_dir, index, config) = index_flushed_by_hand(measure);
    let page = |base: u64, n: u64| SignatureVector::from_pairs((0..n).map(|i| (base + i * 0x9E37_79B9, 1)));
    let original = page(0x1000_0000, 40);
    let docs: Vec<(SignatureVector, usize)> = vec![
        (page(0x5000_0000, 40), 0),
        (original.clone(), 1),
        (near_copy(&original, 3, 0xAAAA), 1),
        (page(0x6000_0000, 40), 1),
        (near_copy(&original, 7, 0xBBBB), 2),
        (page(0x7000_0000, 40), 2),
    ];
    for segment in 0..3 {
        let mut w = index.writer().unwrap();
        for (n, (vector, _)) in docs.iter().enumerate().filter(|(_, d)| d.1 == segment) {
            let signature = signature_of(&config, vector.clone(), n as u64);
            w.insert(&n.to_string(), Document::Signatures(&signature), Metadata::default()).unwrap();
        }
        w.commit().unwrap();
        index.flush().unwrap();
    }
    assert_eq!(index.stats().unwrap().segments, 3);
    let s = index.searcher().unwrap();
    let indexed: Vec<(u64, &SignatureVector)> =
        docs.iter().enumerate().map(|(n, (v, _))| (s.get(&n.to_string()).unwrap().unwrap().id, v)).collect();
    let tau = Threshold::new(0.9).unwrap();
    let wanted = oracle::query(indexed.iter().copied(), &original, measure, tau);
    assert_eq!(wanted.len(), 3, "the page and its two near-duplicates");
    // Without the masks (not built yet): no holder is known.
    let (before, stats) = s.query_with(&original, tau, Pruning::Full).unwrap();
    assert_eq!(before, wanted);
    assert_eq!(stats.lists_known, 0, "{stats:?}");
    s.warm_up(WarmUp::Pages);
    let (after, stats) = s.query_with(&original, tau, Pruning::Full).unwrap();
    assert_eq!(after, wanted);
    // Every signature of the page is held by a copy too: those both
    // copies hold (all but 3 and 7) by documents of two segments, 3 by
    // the copy in the other segment, 7 by the copy beside it (a list of
    // several). No holder is known alone.
    assert_eq!(stats.lists_known, 0, "{stats:?}");
    // A page no copy shares anything with is known at once: every
    // signature of the order (up to the δ1 break) but the two seeds'
    // look-ups.
    let lone = &docs[3].0;
    let lone_wanted = oracle::query(indexed.iter().copied(), lone, measure, tau);
    let (got, stats) = s.query_with(lone, tau, Pruning::Full).unwrap();
    assert_eq!(got, lone_wanted);
    assert_eq!(got.len(), 1);
    assert!(stats.lists_known >= 2, "{stats:?}");
}

/// `original` with its signature `drop` (modulo its count) replaced by
/// `hash`, which nobody else holds.
fn near_copy(original: &SignatureVector, drop: usize, hash: u64) -> SignatureVector {
    let mut pairs: Vec<(u64, u32)> = original.iter().collect();
    let drop = drop % pairs.len();
    pairs[drop] = (hash, 1);
    SignatureVector::from_pairs(pairs)
}

/// The signatures of `original` at the positions `keep(i, count)` picks,
/// and `hash`, which nobody else holds.
fn part_copy(original: &SignatureVector, keep: impl Fn(usize, usize) -> bool, hash: u64) -> SignatureVector {
    let n = original.distinct() as usize;
    let mut pairs: Vec<(u64, u32)> = original.iter().enumerate().filter(|&(i, _)| keep(i, n)).map(|(_, p)| p).collect();
    pairs.push((hash, 1));
    SignatureVector::from_pairs(pairs)
}

/// The self-join's pairs and the oracle's over `indexed`, both sorted.
fn join_and_oracle(
    searcher: &neardex::store::Searcher,
    indexed: &[(u64, &SignatureVector)],
    measure: Similarity,
    tau: Threshold,
) -> (Vec<oracle::Pair>, Vec<oracle::Pair>) {
    let mut expected = oracle::self_join(indexed, measure, tau);
    let mut got = Vec::new();
    searcher.self_join(tau, |p| got.push(p)).unwrap();
    got.sort_unstable_by_key(|p| (p.a, p.b));
    expected.sort_unstable_by_key(|p| (p.a, p.b));
    (got, expected)
}

/// Inserts each document of `docs` (keyed by its position) in the stage
/// it names, `0..stages`, one commit a stage, each but the last flushed
/// (a segment each; the last stage's documents stay pending); returns a
/// searcher and each document's id.
fn insert_by_stage(
    index: &Index,
    config: &neardex::SignatureConfig,
    docs: &[(SignatureVector, u8)],
    stages: u8,
) -> (neardex::store::Searcher, Vec<u64>) {
    for stage in 0..stages {
        let mut w = index.writer().unwrap();
        for (n, (vector, _)) in docs.iter().enumerate().filter(|(_, d)| d.1 == stage) {
            let signature = signature_of(config, vector.clone(), n as u64);
            w.insert(&n.to_string(), Document::Signatures(&signature), Metadata::default()).unwrap();
        }
        w.commit().unwrap();
        if stage + 1 < stages {
            index.flush().unwrap();
        }
    }
    let s = index.searcher().unwrap();
    let ids = (0..docs.len()).map(|n| s.get(&n.to_string()).unwrap().unwrap().id).collect();
    (s, ids)
}

/// A new index under `measure` that flushes only when told to.
fn index_flushed_by_hand(measure: Similarity) -> (tempfile::TempDir, Index, neardex::SignatureConfig) {
    let config = config_with(measure);
    let dir = tempfile::tempdir().unwrap();
    let options = IndexOptions { flush_threshold: 100_000, ..IndexOptions::default() };
    let index = Index::create_with(dir.path(), config.clone(), options).unwrap();
    (dir, index, config)
}
