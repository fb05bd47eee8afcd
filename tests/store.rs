//! The persistent index against a model: lifecycle, typed errors, flushes,
//! snapshots, corruption, and random operation sequences compared with an
//! in-memory map and the brute-force oracle.

use std::collections::BTreeMap;

use neardex::oracle;
use neardex::store::{Document, Index, IndexError, IndexOptions, InsertIfNew, Metadata, Searcher};
use neardex::{DocumentSignature, Fingerprint, SignatureConfig, Signer, Threshold};
use proptest::prelude::*;

#[path = "common/cases.rs"]
mod cases;
#[path = "common/workload.rs"]
mod workload;

use workload::{percent, Step as Op};

const ARTICLE: &str = "The city council voted on Tuesday to approve a plan for a new central library, ending a \
                       debate that had lasted more than three years. The building will replace the old branch.";

fn meta(url: &str) -> Metadata {
    Metadata { url: Some(url.to_owned()), date: Some("2024-05-01".into()), user: vec![7], ..Metadata::default() }
}

fn small(threshold: usize) -> IndexOptions {
    IndexOptions { flush_threshold: threshold, ..IndexOptions::default() }
}

#[test]
fn documents_survive_commit_reopen_and_flush() {
    let dir = tempfile::tempdir().unwrap();
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    {
        let index = Index::create(dir.path(), SignatureConfig::default()).unwrap();
        let mut w = index.writer().unwrap();
        let a = w.insert("a", Document::Text(ARTICLE), meta("http://a/")).unwrap();
        let b = w.insert("b", Document::Html(format!("<p>{ARTICLE}</p>").as_bytes()), Metadata::default()).unwrap();
        assert_eq!(a.exact_duplicate_of, None);
        assert_eq!(b.exact_duplicate_of, Some(a.id), "same words, other markup: an exact duplicate");
        assert!(matches!(
            w.insert("a", Document::Text("x"), Metadata::default()),
            Err(IndexError::DuplicateKey { .. })
        ));
        w.commit().unwrap();
    }
    let index = Index::open_with(dir.path(), small(1)).unwrap();
    let s = index.searcher().unwrap();
    let a = s.get("a").unwrap().unwrap();
    assert_eq!(a.metadata, meta("http://a/"));
    assert_eq!(a.vector, signer.sign_text(ARTICLE).vector);
    assert_eq!(a.fingerprint, signer.sign_text(ARTICLE).fingerprint);
    assert_eq!(s.len(), 2);
    // A commit past the threshold flushes; the old snapshot still reads.
    let mut w = index.writer().unwrap();
    w.insert("c", Document::Text("Another story is here, and it is a different one."), Metadata::default()).unwrap();
    assert_eq!(w.commit().unwrap(), 0, "flushed");
    assert_eq!(index.stats().unwrap().segments, 1);
    assert_eq!(s.len(), 2, "the old snapshot is unchanged");
    assert_eq!(s.get("a").unwrap().unwrap().vector, a.vector);
    let fresh = index.searcher().unwrap();
    assert_eq!(fresh.len(), 3);
    assert_eq!(fresh.get("a").unwrap().unwrap(), a);
    index.verify().unwrap();
    drop((s, fresh, index));
    let index = Index::open(dir.path()).unwrap();
    let s = index.searcher().unwrap();
    assert_eq!(s.get("a").unwrap().unwrap(), a);
    assert_eq!(s.get("nope").unwrap(), None);
    index.verify().unwrap();
}

#[test]
fn replace_and_delete_work_in_segments_and_delta() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::create_with(dir.path(), SignatureConfig::default(), small(2)).unwrap();
    let mut w = index.writer().unwrap();
    w.insert("seg1", Document::Text(ARTICLE), Metadata::default()).unwrap();
    w.insert("seg2", Document::Text("The quick brown fox is jumping over the lazy dog."), Metadata::default()).unwrap();
    w.commit().unwrap();
    assert_eq!(index.stats().unwrap().segments, 1);
    let mut w = index.writer().unwrap();
    w.insert("delta", Document::Text("A note that is pending."), Metadata::default()).unwrap();
    assert!(w.delete("seg1").unwrap());
    assert!(!w.delete("never").unwrap());
    w.replace("seg2", Document::Text("The fox has moved."), meta("http://new/")).unwrap();
    w.commit().unwrap();
    let s = index.searcher().unwrap();
    assert_eq!(s.get("seg1").unwrap(), None);
    assert_eq!(s.get("seg2").unwrap().unwrap().metadata, meta("http://new/"));
    // Two pending documents reached the threshold of 2: the commit flushed,
    // and the first segment, both of whose documents are deleted, went.
    let stats = index.stats().unwrap();
    assert_eq!((stats.documents, stats.deleted, stats.pending, stats.segments), (2, 0, 0, 1));
    index.verify().unwrap();
    // A writer dropped without commit changes nothing.
    let mut w = index.writer().unwrap();
    w.delete("delta").unwrap();
    w.insert("ghost", Document::Text("never committed"), Metadata::default()).unwrap();
    drop(w);
    let s = index.searcher().unwrap();
    assert!(s.get("delta").unwrap().is_some() && s.get("ghost").unwrap().is_none());
}

#[test]
fn typed_errors_when_opening() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(Index::open(dir.path()), Err(IndexError::NotAnIndex { .. })));
    assert!(matches!(Index::open_read_only(dir.path()), Err(IndexError::NotAnIndex { .. })));
    let bad = SignatureConfig::word_shingles(0);
    assert!(matches!(Index::create(dir.path(), bad), Err(IndexError::Config(_))));
    let index = Index::create(dir.path(), SignatureConfig::default()).unwrap();
    // A second writer, in this process too, is refused with a clear error.
    let second = Index::open(dir.path()).unwrap_err();
    assert!(matches!(second, IndexError::Locked { .. }), "{second}");
    assert!(second.to_string().contains("locked by another writer"));
    drop(index);
    assert!(matches!(Index::create(dir.path(), SignatureConfig::default()), Err(IndexError::AlreadyExists { .. })));
    assert!(matches!(
        Index::open_expecting(dir.path(), &SignatureConfig::word_shingles(3)),
        Err(IndexError::ConfigMismatch)
    ));
    Index::open_expecting(dir.path(), &SignatureConfig::default()).unwrap();

    // Another catalog format version.
    {
        let db = redb::Database::open(dir.path().join("catalog.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("meta")).unwrap();
            meta.insert("format", 99u32.to_le_bytes().as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let err = Index::open(dir.path()).unwrap_err();
    assert!(matches!(err, IndexError::Incompatible { what: "catalog", found: 99, .. }), "{err}");

    // A damaged catalog file.
    let other = tempfile::tempdir().unwrap();
    Index::create(other.path(), SignatureConfig::default()).unwrap();
    std::fs::write(other.path().join("catalog.redb"), b"this is not a redb file at all").unwrap();
    let err = Index::open(other.path()).unwrap_err();
    assert!(matches!(err, IndexError::Catalog { .. }), "{err}");
}

#[test]
fn leftover_files_are_removed_at_open_and_corruption_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    {
        let index = Index::create_with(dir.path(), SignatureConfig::default(), small(1)).unwrap();
        let mut w = index.writer().unwrap();
        w.insert("a", Document::Text(ARTICLE), Metadata::default()).unwrap();
        w.commit().unwrap();
    }
    let stray = dir.path().join("seg-00000000000000ff.nds");
    std::fs::write(&stray, b"left by a crash between rename and catalog commit").unwrap();
    std::fs::write(dir.path().join("seg-0000000000000100.nds.tmp"), b"half written").unwrap();
    let index = Index::open(dir.path()).unwrap();
    assert!(!stray.exists());
    assert!(!dir.path().join("seg-0000000000000100.nds.tmp").exists());
    index.verify().unwrap();
    drop(index);

    // Flip one byte in the middle of the only segment's hashes (section 3:
    // its table entry's offset and length, FORMAT.md §7).
    let seg = dir.path().join("seg-0000000000000001.nds");
    let mut bytes = std::fs::read(&seg).unwrap();
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let middle = u64_at(64 + 2 * 24 + 8) + u64_at(64 + 2 * 24 + 16) / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();
    let index = Index::open(dir.path()).unwrap();
    match index.verify() {
        Err(IndexError::Corrupted { file, .. }) => assert_eq!(file, "seg-0000000000000001.nds"),
        other => panic!("verify after a flipped byte: {other:?}"),
    }
}

#[test]
fn read_only_opener_follows_the_writer_after_reload() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::create_with(dir.path(), SignatureConfig::default(), small(2)).unwrap();
    let mut w = index.writer().unwrap();
    w.insert("a", Document::Text(ARTICLE), Metadata::default()).unwrap();
    w.commit().unwrap();
    let reader = Index::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.searcher().unwrap().len(), 1);
    assert!(matches!(reader.writer(), Err(IndexError::ReadOnly)));
    let mut w = index.writer().unwrap();
    w.insert("b", Document::Text("Second story is not the first one at all."), Metadata::default()).unwrap();
    w.insert("c", Document::Text("Third story has been written by a reporter."), Metadata::default()).unwrap();
    w.commit().unwrap(); // flushes: 3 pending >= 2
    assert_eq!(reader.searcher().unwrap().len(), 1, "no reload yet");
    reader.reload().unwrap();
    let s = reader.searcher().unwrap();
    assert_eq!(s.len(), 3);
    assert!(s.get("c").unwrap().is_some());
}

/// Sizes of the segment files in `dir`.
fn segment_file_sizes(dir: &std::path::Path) -> Vec<u64> {
    let mut sizes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().ends_with(".nds") {
            sizes.push(entry.metadata().unwrap().len());
        }
    }
    sizes
}

#[test]
fn merges_stop_at_the_bound_and_optimize_still_merges_everything() {
    let dir = tempfile::tempdir().unwrap();
    let texts: Vec<String> =
        (0..64).map(|i| format!("Story {i:02} is about the {:02} and it has been told.", i % 17)).collect();
    let add = |index: &Index, i: usize| {
        let mut w = index.writer().unwrap();
        w.insert(&format!("k{i}"), Document::Text(&texts[i]), Metadata::default()).unwrap();
        w.commit().unwrap(); // every commit flushes a one-document segment
    };
    let index = Index::create_with(dir.path(), SignatureConfig::default(), small(1)).unwrap();
    add(&index, 0);
    let one = segment_file_sizes(dir.path());
    assert_eq!(one.len(), 1);
    drop(index);
    // Room for eight one-document segments (all about the same size), not
    // for eight segments of eight documents.
    let bound = one[0] * 10;
    let options = IndexOptions { max_merge_bytes: bound, ..small(1) };
    let index = Index::open_with(dir.path(), options).unwrap();
    for i in 1..64 {
        add(&index, i);
    }
    let stats = index.stats().unwrap();
    assert_eq!((stats.documents, stats.segments, stats.pending), (64, 8, 0), "{stats:?}");
    let sizes = segment_file_sizes(dir.path());
    assert_eq!(sizes.len(), 8);
    assert!(sizes.iter().all(|&s| s <= bound && s > one[0]), "{sizes:?}, bound {bound}");
    assert!(sizes.iter().sum::<u64>() > bound, "the next merge would pass the bound");
    index.verify().unwrap();
    let searcher = index.searcher().unwrap();
    assert_eq!(searcher.segment_bytes(), sizes.iter().sum::<u64>(), "the segment files' bytes");
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    for (i, text) in texts.iter().enumerate() {
        let found = searcher.query(&signer.sign_text(text).vector, Threshold::new(1.0).unwrap()).unwrap();
        assert!(found.iter().any(|m| searcher.get_by_id(m.id).unwrap().unwrap().key == format!("k{i}")), "k{i}");
    }
    // Asked for, `optimize` merges past the bound.
    index.optimize().unwrap();
    assert_eq!(index.stats().unwrap().segments, 1);
    assert_eq!(index.searcher().unwrap().len(), 64);
}

/// The index's pairs at τ = 0.5 against the brute-force self-join of its
/// live vectors, and its queries against the model (`check`).
fn check_exact(index: &Index, model: &Model, signer: &Signer) {
    let searcher = index.searcher().unwrap();
    check(&searcher, model, signer).unwrap();
    let mut live = Vec::new();
    searcher.for_each_live(|id, v| live.push((id, v.clone()))).unwrap();
    let docs: Vec<(u64, &neardex::SignatureVector)> = live.iter().map(|(id, v)| (*id, v)).collect();
    let tau = Threshold::new(0.5).unwrap();
    let mut pairs = Vec::new();
    searcher.self_join(tau, |p| pairs.push(p)).unwrap();
    pairs.sort_by_key(|p| (p.a, p.b));
    let mut expected = oracle::self_join(&docs, signer.config().similarity, tau);
    expected.sort_by_key(|p| (p.a, p.b));
    assert_eq!(pairs, expected);
}

/// Commits `k0`..`k59` in three commits of twenty (each its own segment
/// under `small(20)`, maintenance waited for) and returns the model.
fn commit_three_parts_of_twenty(index: &Index) -> Model {
    let mut model: Model = BTreeMap::new();
    for segment in 0..3 {
        let mut w = index.writer().unwrap();
        for i in 0..20 {
            let key = format!("k{}", segment * 20 + i);
            let text = format!("Story {i} of part {segment} is about the {} and it has been told.", i % 7);
            w.insert(&key, Document::Text(&text), Metadata::default()).unwrap();
            model.insert(key, (text, Metadata::default()));
        }
        w.commit().unwrap();
        index.wait_for_maintenance();
    }
    model
}

#[test]
fn segments_past_the_deleted_share_are_rewritten_and_emptied_ones_dropped() {
    for background in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let signer = Signer::new(SignatureConfig::default()).unwrap();
        // Commits of 20 documents flush three segments of 20 (A, B, C), too
        // few for a tier merge.
        let options = IndexOptions { background_maintenance: background, ..small(20) };
        assert_eq!(options.max_deleted_percent, 25);
        let index = Index::create_with(dir.path(), SignatureConfig::default(), options).unwrap();
        let mut model = commit_three_parts_of_twenty(&index);
        let settled = |index: &Index| {
            index.wait_for_maintenance();
            assert_eq!(index.maintenance_error(), None);
            let stats = index.stats().unwrap();
            (stats.documents, stats.deleted, stats.segments)
        };
        assert_eq!(settled(&index), (60, 0, 3));
        let delete = |index: &Index, model: &mut Model, keys: std::ops::Range<usize>| {
            let mut w = index.writer().unwrap();
            for k in keys {
                assert!(w.delete(&format!("k{k}")).unwrap());
                model.remove(&format!("k{k}"));
            }
            w.commit().unwrap();
        };
        // A quarter of A deleted: not more than 25%, so A keeps them.
        delete(&index, &mut model, 0..5);
        assert_eq!(settled(&index), (55, 5, 3));
        let sizes = segment_file_sizes(dir.path());
        check_exact(&index, &model, &signer);
        // One more: A is rewritten without its six.
        delete(&index, &mut model, 5..6);
        assert_eq!(settled(&index), (54, 0, 3));
        let after = segment_file_sizes(dir.path());
        assert!(after.iter().sum::<u64>() < sizes.iter().sum::<u64>(), "{sizes:?} -> {after:?}");
        check_exact(&index, &model, &signer);
        // Every document of B: B goes.
        delete(&index, &mut model, 20..40);
        assert_eq!(settled(&index), (34, 0, 2));
        check_exact(&index, &model, &signer);
        // The counts are rebuilt from the catalog at open: five of C before
        // a reopen and one after make six.
        delete(&index, &mut model, 40..45);
        assert_eq!(settled(&index), (29, 5, 2));
        drop(index);
        let index = Index::open_with(dir.path(), options).unwrap();
        delete(&index, &mut model, 45..46);
        assert_eq!(settled(&index), (28, 0, 2));
        index.verify().unwrap();
        check_exact(&index, &model, &signer);
        assert_eq!(segment_file_sizes(dir.path()).len(), 2, "rewritten and dropped files are removed");
    }
}

#[test]
fn a_segment_past_the_merge_bound_is_rewritten_once_its_live_bytes_fit() {
    let dir = tempfile::tempdir().unwrap();
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let index = Index::create_with(dir.path(), SignatureConfig::default(), small(20)).unwrap();
    let mut model = commit_three_parts_of_twenty(&index);
    // `optimize` merges whatever the bound: one segment of 60 documents,
    // reopened with a bound of half its file.
    index.optimize().unwrap();
    let size = segment_file_sizes(dir.path());
    assert_eq!(size.len(), 1);
    drop(index);
    let options = IndexOptions { max_merge_bytes: size[0] / 2, ..small(20) };
    let index = Index::open_with(dir.path(), options).unwrap();
    let delete = |model: &mut Model, keys: std::ops::Range<usize>| {
        let mut w = index.writer().unwrap();
        for k in keys {
            assert!(w.delete(&format!("k{k}")).unwrap());
            model.remove(&format!("k{k}"));
        }
        w.commit().unwrap();
        let stats = index.stats().unwrap();
        (stats.documents, stats.deleted, stats.segments)
    };
    // A third deleted is past the 25% share, but two thirds of the file is
    // past the bound: the deletions stay.
    assert_eq!(delete(&mut model, 0..20), (40, 20, 1));
    check_exact(&index, &model, &signer);
    // 32 of 60 deleted: what a rewrite writes (28/60 of the file) fits.
    assert_eq!(delete(&mut model, 20..32), (28, 0, 1));
    let after = segment_file_sizes(dir.path());
    // (Its fixed parts keep the file from shrinking in proportion.)
    assert!(after[0] < size[0], "{size:?} -> {after:?}");
    index.verify().unwrap();
    check_exact(&index, &model, &signer);
}

#[test]
fn tiered_merging_keeps_segments_logarithmic_and_optimize_drops_deletes() {
    let dir = tempfile::tempdir().unwrap();
    // Deleted documents stay until `optimize` (no segment is rewritten for
    // its share of them; only segments left without a live document go).
    let options = IndexOptions { max_deleted_percent: 100, ..small(1) };
    let index = Index::create_with(dir.path(), SignatureConfig::default(), options).unwrap();
    let texts: Vec<String> =
        (0..150).map(|i| format!("Story {i} is about the {} and it has been told.", i % 17)).collect();
    let mut max_segments = 0;
    for (i, t) in texts.iter().enumerate() {
        let mut w = index.writer().unwrap();
        w.insert(&format!("k{i}"), Document::Text(t), Metadata::default()).unwrap();
        w.commit().unwrap(); // every commit flushes a one-document segment
        max_segments = max_segments.max(index.stats().unwrap().segments);
    }
    // Fewer than MERGE_FACTOR segments per tier; 150 documents need 3 tiers.
    let bound = (neardex::store::MERGE_FACTOR as u64 - 1) * 3;
    assert!(max_segments <= bound, "{max_segments} segments at once (bound {bound})");
    let old = index.searcher().unwrap();
    let before = index.stats().unwrap().segments;
    let mut w = index.writer().unwrap();
    for i in (0..150).step_by(3) {
        assert!(w.delete(&format!("k{i}")).unwrap());
    }
    w.commit().unwrap();
    // One-document segments whose document was deleted went at the commit,
    // each with its deletion; the other deletions stay.
    let stats = index.stats().unwrap();
    assert!(stats.deleted > 0 && stats.segments < before, "{stats:?}");
    assert_eq!(50 - stats.deleted, before - stats.segments, "{stats:?}");
    index.optimize().unwrap();
    let stats = index.stats().unwrap();
    assert_eq!((stats.documents, stats.deleted, stats.segments, stats.pending), (100, 0, 1, 0));
    index.verify().unwrap();
    // The snapshot taken before the merge still reads its (now unlinked) files.
    assert_eq!(old.len(), 150);
    assert!(old.get("k0").unwrap().is_some());
    let segment_files = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".nds"));
    assert_eq!(segment_files.count(), 1, "merged-away files are removed");
    drop((old, index));
    let reopened = Index::open(dir.path()).unwrap();
    assert_eq!(reopened.searcher().unwrap().len(), 100);
    reopened.verify().unwrap();
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..12, 0u8..6).prop_map(|(k, t)| Op::Insert(k, t)),
        2 => (0u8..12, 0u8..6, 50u8..=100).prop_map(|(k, t, p)| Op::InsertIfNew(k, t, p)),
        2 => (0u8..12, 0u8..6).prop_map(|(k, t)| Op::Replace(k, t)),
        2 => (0u8..12).prop_map(Op::Delete),
        2 => Just(Op::Commit),
        1 => Just(Op::BulkCommit),
        1 => Just(Op::Abort),
        1 => Just(Op::Flush),
        1 => Just(Op::Optimize),
        1 => Just(Op::Reopen),
    ]
}

/// Texts that overlap heavily, including exact duplicates and one without
/// signatures.
fn text(t: u8) -> String {
    let variants = [
        ARTICLE.to_owned(),
        format!("{ARTICLE} A reporter has added a line."),
        ARTICLE.replace("Tuesday", "Wednesday"),
        "The market is closed and the trading has been slow.".to_owned(),
        "12 34 56".to_owned(),
        ARTICLE.to_uppercase(),
    ];
    variants[t as usize % variants.len()].clone()
}

type Model = BTreeMap<String, (String, Metadata)>;

fn check(searcher: &Searcher, model: &Model, signer: &Signer) -> Result<(), TestCaseError> {
    prop_assert_eq!(searcher.len(), model.len() as u64);
    let mut live = Vec::new();
    searcher.for_each_live(|id, v| live.push((id, v.clone()))).unwrap();
    prop_assert_eq!(live.len(), model.len());
    let mut ids = BTreeMap::new();
    for (key, (text, metadata)) in model {
        let doc = searcher.get(key).unwrap().expect("model key present");
        prop_assert_eq!(&doc.metadata, metadata);
        prop_assert_eq!(&doc.vector, &signer.sign_text(text).vector);
        // What the catalog alone says agrees, pending or in a segment.
        let info = searcher.describe(doc.id).unwrap().expect("a live id is described");
        prop_assert_eq!(
            (info.id, &info.key, info.fingerprint, &info.metadata),
            (doc.id, key, doc.fingerprint, metadata)
        );
        ids.insert(doc.id, doc.vector);
    }
    prop_assert_eq!(searcher.describe(u64::MAX).unwrap(), None);
    prop_assert_eq!(searcher.live_ids().unwrap(), ids.keys().copied().collect::<Vec<u64>>());
    // By URL: the model's documents with it, in the order of their ids.
    let urls: std::collections::BTreeSet<&str> = model.values().filter_map(|(_, m)| m.url.as_deref()).collect();
    for url in urls.into_iter().chain(["no such URL"]) {
        let mut expected: Vec<(u64, &str)> = model
            .iter()
            .filter(|(_, (_, m))| m.url.as_deref() == Some(url))
            .map(|(key, _)| (searcher.get(key).unwrap().expect("model key present").id, key.as_str()))
            .collect();
        expected.sort_unstable();
        let found = searcher.find_by_url(url).unwrap();
        let found: Vec<(u64, &str)> = found.iter().map(|d| (d.id, d.key.as_str())).collect();
        prop_assert_eq!(found, expected);
    }
    // Many at once, in the order asked: descending, an unknown id, a repeat.
    let mut asked: Vec<u64> = ids.keys().rev().copied().collect();
    asked.push(u64::MAX);
    asked.extend(ids.keys().next());
    let many = searcher.describe_many(&asked).unwrap();
    prop_assert_eq!(many.len(), asked.len());
    for (id, info) in asked.iter().zip(&many) {
        prop_assert_eq!(info, &searcher.describe(*id).unwrap());
    }
    for tau in [0.3, 0.8, 1.0] {
        let tau = Threshold::new(tau).unwrap();
        let q = signer.sign_text(&text(0)).vector;
        let got = searcher.query_exhaustive(&q, tau).unwrap();
        let expected = oracle::query(ids.iter().map(|(&id, v)| (id, v)), &q, signer.config().similarity, tau);
        prop_assert_eq!(searcher.query(&q, tau).unwrap(), expected.clone(), "the pruned query");
        prop_assert_eq!(got, expected);
    }
    Ok(())
}

proptest! {
    // 24 cases by default (each builds and reopens indexes); PROPTEST_CASES=N for more.
    #![proptest_config(cases::proptest_cases(24))]

    #[test]
    fn random_workloads_match_the_model(ops in prop::collection::vec(arb_op(), 1..40), background in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let signer = Signer::new(SignatureConfig::default()).unwrap();
        // With background maintenance, flushes and merges run while the
        // next batches commit and the checks read.
        let options = IndexOptions { background_maintenance: background, ..small(3) };
        let mut index = Some(Index::create_with(dir.path(), SignatureConfig::default(), options).unwrap());
        let mut committed: Model = BTreeMap::new();
        let mut staged: Model = committed.clone();
        // Key → (id, fingerprint) of the live documents: each insert's
        // `exact_duplicate_of` must be the smallest id with its fingerprint.
        let mut committed_ids: BTreeMap<String, (u64, Fingerprint)> = BTreeMap::new();
        let mut writer_open = false;
        // A searcher of the state before the last commit, with that state's
        // model: held across the next commit (and flushes and merges), it
        // must still answer as its snapshot did.
        let mut held: Option<(Searcher, Model)> = None;
        // The writer borrows the index; keep the staged operations and replay
        // them into one writer at commit, as a user's batch would arrive.
        let mut batch: Vec<Op> = Vec::new();
        for op in ops {
            match op {
                Op::Insert(..) | Op::InsertIfNew(..) | Op::Replace(..) | Op::Delete(..) => {
                    writer_open = true;
                    batch.push(op);
                    match op {
                        Op::Insert(k, t) => {
                            staged.entry(format!("k{k}")).or_insert((text(t), Metadata { url: Some(format!("u{t}")), ..Metadata::default() }));
                        }
                        Op::InsertIfNew(k, t, p) => {
                            let key = format!("k{k}");
                            if !staged.contains_key(&key) && workload::similar_keys(&staged, &text(t), percent(p)).is_empty() {
                                staged.insert(key, (text(t), Metadata { url: Some(format!("u{t}")), ..Metadata::default() }));
                            }
                        }
                        Op::Replace(k, t) => {
                            staged.insert(format!("k{k}"), (text(t), Metadata { date: Some(format!("d{t}")), ..Metadata::default() }));
                        }
                        Op::Delete(k) => {
                            staged.remove(&format!("k{k}"));
                        }
                        _ => unreachable!(),
                    }
                }
                Op::Commit | Op::BulkCommit => {
                    let idx = index.as_ref().unwrap();
                    let mut w = if op == Op::BulkCommit { idx.bulk_writer().unwrap() } else { idx.writer().unwrap() };
                    let mut ids = committed_ids.clone();
                    let expected_duplicate = |ids: &BTreeMap<String, (u64, Fingerprint)>, t: u8| {
                        let fingerprint = signer.sign_text(&text(t)).fingerprint;
                        ids.values().filter(|(_, f)| *f == fingerprint).map(|(id, _)| *id).min()
                    };
                    for op in batch.drain(..) {
                        match op {
                            Op::Insert(k, t) => {
                                let key = format!("k{k}");
                                let expected = expected_duplicate(&ids, t);
                                let r = w.insert(&key, Document::Text(&text(t)), Metadata { url: Some(format!("u{t}")), ..Metadata::default() });
                                match r {
                                    Ok(outcome) => {
                                        prop_assert_eq!(outcome.exact_duplicate_of, expected);
                                        ids.insert(key, (outcome.id, signer.sign_text(&text(t)).fingerprint));
                                    }
                                    Err(IndexError::DuplicateKey { .. }) => prop_assert!(ids.contains_key(&key)),
                                    Err(e) => prop_assert!(false, "insert failed: {:?}", e),
                                }
                            }
                            // Whether it was added is checked against the
                            // model (which decided by brute force) after
                            // the commit.
                            Op::InsertIfNew(k, t, p) => {
                                let key = format!("k{k}");
                                let expected = expected_duplicate(&ids, t);
                                let r = w.insert_if_new(&key, Document::Text(&text(t)), Metadata { url: Some(format!("u{t}")), ..Metadata::default() }, percent(p));
                                match r {
                                    Ok(InsertIfNew::Inserted(outcome)) => {
                                        prop_assert_eq!(outcome.exact_duplicate_of, expected);
                                        ids.insert(key, (outcome.id, signer.sign_text(&text(t)).fingerprint));
                                    }
                                    Ok(InsertIfNew::Matches(matches)) => prop_assert!(!matches.is_empty()),
                                    Err(IndexError::DuplicateKey { .. }) => prop_assert!(ids.contains_key(&key)),
                                    Err(e) => prop_assert!(false, "insert_if_new failed: {:?}", e),
                                }
                            }
                            Op::Replace(k, t) => {
                                let key = format!("k{k}");
                                ids.remove(&key);
                                let expected = expected_duplicate(&ids, t);
                                let outcome = w.replace(&key, Document::Text(&text(t)), Metadata { date: Some(format!("d{t}")), ..Metadata::default() }).unwrap();
                                prop_assert_eq!(outcome.exact_duplicate_of, expected);
                                ids.insert(key, (outcome.id, signer.sign_text(&text(t)).fingerprint));
                            }
                            Op::Delete(k) => {
                                w.delete(&format!("k{k}")).unwrap();
                                ids.remove(&format!("k{k}"));
                            }
                            _ => unreachable!(),
                        }
                    }
                    w.commit().unwrap();
                    committed_ids = ids;
                    committed = staged.clone();
                    writer_open = false;
                    check(&idx.searcher().unwrap(), &committed, &signer)?;
                    if let Some((searcher, then)) = held.take() {
                        check(&searcher, &then, &signer)?;
                    }
                    held = Some((idx.searcher().unwrap(), committed.clone()));
                }
                Op::Abort => {
                    batch.clear();
                    staged = committed.clone();
                    writer_open = false;
                }
                Op::Flush => {
                    if !writer_open {
                        index.as_ref().unwrap().flush().unwrap();
                        check(&index.as_ref().unwrap().searcher().unwrap(), &committed, &signer)?;
                    }
                }
                Op::Optimize => {
                    if !writer_open {
                        index.as_ref().unwrap().optimize().unwrap();
                        let idx = index.as_ref().unwrap();
                        prop_assert!(idx.stats().unwrap().segments <= 1);
                        check(&idx.searcher().unwrap(), &committed, &signer)?;
                    }
                }
                Op::Reopen => {
                    if !writer_open {
                        if let Some((searcher, then)) = held.take() {
                            check(&searcher, &then, &signer)?;
                        }
                        drop(index.take());
                        index = Some(Index::open_with(dir.path(), options).unwrap());
                        check(&index.as_ref().unwrap().searcher().unwrap(), &committed, &signer)?;
                    }
                }
            }
        }
        let idx = index.as_ref().unwrap();
        idx.wait_for_maintenance();
        if let Some((searcher, then)) = held.take() {
            check(&searcher, &then, &signer)?;
        }
        prop_assert_eq!(idx.maintenance_error(), None);
        idx.verify().unwrap();
        check(&idx.searcher().unwrap(), &committed, &signer)?;
        let stats = idx.stats().unwrap();
        let vectors: Vec<_> = committed.values().map(|(t, _)| signer.sign_text(t).vector).collect();
        let unsigned = vectors.iter().filter(|v| v.is_empty()).count() as u64;
        let occurrences: u64 = vectors.iter().map(|v| v.total()).sum();
        prop_assert_eq!(
            (stats.documents, stats.without_signatures, stats.signatures),
            (committed.len() as u64, unsigned, occurrences)
        );
    }
}

#[test]
fn insert_batch_stages_like_single_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::create_with(dir.path(), SignatureConfig::default(), small(1_000)).unwrap();
    let mut w = index.writer().unwrap();
    w.insert("a", Document::Text(&text(0)), meta("ua")).unwrap();
    let docs = [("b", text(1)), ("c", text(0)), ("d", text(3))];
    let outcomes =
        w.insert_batch(docs.iter().map(|(k, t)| (k.to_string(), Document::Text(t), meta(&format!("u{k}"))))).unwrap();
    let ids: Vec<u64> = outcomes.iter().map(|o| o.id).collect();
    assert_eq!(ids, [2, 3, 4]);
    assert_eq!(outcomes[1].exact_duplicate_of, Some(1), "c has a's text");
    assert_eq!((outcomes[0].exact_duplicate_of, outcomes[2].exact_duplicate_of), (None, None));
    // A taken key stops the batch: the documents before it stay staged.
    let err = w
        .insert_batch([
            ("e", Document::Text("fresh text here"), Metadata::default()),
            ("b", Document::Text("again"), Metadata::default()),
            ("f", Document::Text("never reached"), Metadata::default()),
        ])
        .unwrap_err();
    assert!(matches!(err, IndexError::DuplicateKey { ref key } if key == "b"), "{err}");
    w.commit().unwrap();
    let s = index.searcher().unwrap();
    assert_eq!(s.len(), 5);
    assert_eq!(s.get("d").unwrap().unwrap().metadata, meta("ud"));
    assert!(s.get("e").unwrap().is_some() && s.get("f").unwrap().is_none());
    // The refused key still names the document it named.
    let b = s.get("b").unwrap().unwrap();
    assert_eq!((b.id, b.metadata), (ids[0], meta("ub")));
    index.verify().unwrap();
}

/// Signatures the writer takes (`insert_signed`, `insert_batch_signed`)
/// stage what the same signatures handed in by reference stage: the same
/// outcomes, the same stored vectors, in a plain and in a bulk writer; a
/// taken key is refused as by `insert`.
#[test]
fn signatures_taken_stage_what_signatures_lent_stage() {
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let texts: Vec<String> = (0..40).map(|i| format!("{ARTICLE} Note {}.", i % 13)).collect();
    let stored = |taken: bool, bulk: bool| {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::create_with(dir.path(), SignatureConfig::default(), small(1_000)).unwrap();
        let mut w = if bulk { index.bulk_writer().unwrap() } else { index.writer().unwrap() };
        let signed: Vec<DocumentSignature> = texts.iter().map(|t| signer.sign_text(t)).collect();
        let mut outcomes = Vec::new();
        if taken {
            let mut signed = signed.into_iter().enumerate();
            let (i, first) = signed.next().unwrap();
            outcomes.push(w.insert_signed(&format!("k{i}"), first, meta("u0")).unwrap());
            outcomes.extend(
                w.insert_batch_signed(signed.map(|(i, s)| (format!("k{i}"), s, meta(&format!("u{i}"))))).unwrap(),
            );
            let again = w.insert_signed("k3", signer.sign_text("again"), Metadata::default()).unwrap_err();
            assert!(matches!(again, IndexError::DuplicateKey { ref key } if key == "k3"), "{again}");
        } else {
            let mut lent = signed.iter().enumerate();
            let (i, first) = lent.next().unwrap();
            outcomes.push(w.insert(&format!("k{i}"), Document::Signatures(first), meta("u0")).unwrap());
            outcomes.extend(
                w.insert_batch(lent.map(|(i, s)| (format!("k{i}"), Document::Signatures(s), meta(&format!("u{i}")))))
                    .unwrap(),
            );
        }
        w.commit().unwrap();
        index.verify().unwrap();
        let s = index.searcher().unwrap();
        let documents: Vec<_> = (0..texts.len())
            .map(|i| s.get(&format!("k{i}")).unwrap().expect("stored"))
            .map(|d| (d.id, d.metadata, d.vector))
            .collect();
        (outcomes, documents)
    };
    for bulk in [false, true] {
        let (outcomes, documents) = stored(true, bulk);
        assert_eq!(outcomes.iter().filter(|o| o.exact_duplicate_of.is_some()).count(), 27, "40 texts, 13 distinct");
        assert_eq!((outcomes, documents), stored(false, bulk), "bulk: {bulk}");
    }
}

/// Background maintenance under a writer that keeps deleting and replacing
/// documents that flushes and merges are writing: after every commit the
/// searcher agrees with the model; at the end, and after reopening, the
/// catalog and segments verify and agree too.
#[test]
fn background_maintenance_reconciles_concurrent_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let options = IndexOptions { background_maintenance: true, ..small(4) };
    let index = Index::create_with(dir.path(), SignatureConfig::default(), options).unwrap();
    let mut model: Model = BTreeMap::new();
    let mut flushed_while_writing = 0;
    for round in 0..150u32 {
        let mut w = index.writer().unwrap();
        for i in 0..3 {
            let key = format!("k{}", (round * 3 + i) % 97);
            let t = ((round + i) % 6) as u8;
            let metadata = Metadata { url: Some(format!("u{round}")), ..Metadata::default() };
            w.replace(&key, Document::Text(&text(t)), metadata.clone()).unwrap();
            model.insert(key, (text(t), metadata));
        }
        // Delete documents of earlier rounds: pending ones (maybe being
        // flushed) and flushed ones (maybe being merged).
        for back in [1, 2, 5, 11] {
            let key = format!("k{}", (round * 3 + 97 - back) % 97);
            if round % 2 == 0 {
                w.delete(&key).unwrap();
                model.remove(&key);
            }
        }
        let pending = w.commit().unwrap();
        if pending >= 4 {
            flushed_while_writing += 1;
        }
        // The write stall: a commit that finds twice the threshold pending
        // waits for the flush, so no more than that is ever left pending.
        assert!(index.stats().unwrap().pending < 8, "round {round}");
        let searcher = index.searcher().unwrap();
        assert_eq!(searcher.len(), model.len() as u64, "round {round}");
        for (key, (t, metadata)) in &model {
            let doc = searcher.get(key).unwrap().unwrap_or_else(|| panic!("round {round}: {key} missing"));
            assert_eq!(&doc.metadata, metadata);
            assert_eq!(doc.vector, signer.sign_text(t).vector);
        }
    }
    assert!(flushed_while_writing > 0, "commits returned before their flush");
    index.wait_for_maintenance();
    assert_eq!(index.maintenance_error(), None);
    index.verify().unwrap();
    // How many segments remain depends on how the flushes fell (a slow
    // machine flushes larger batches, whose merges can gather everything
    // into one segment); that some exist and little is pending does not.
    let stats = index.stats().unwrap();
    assert!(stats.segments >= 1 && stats.pending < 4, "{stats:?}");
    let live = |index: &Index| {
        let mut live = Vec::new();
        index.searcher().unwrap().for_each_live(|id, v| live.push((id, v.clone()))).unwrap();
        live.sort_by_key(|l| l.0);
        live
    };
    let before = live(&index);
    assert_eq!(before.len(), model.len());
    drop(index);
    let reopened = Index::open_with(dir.path(), options).unwrap();
    reopened.verify().unwrap();
    assert_eq!(live(&reopened), before);
    reopened.optimize().unwrap();
    reopened.verify().unwrap();
    assert_eq!(live(&reopened), before);
}

#[test]
fn an_index_with_a_frequency_filter_keeps_it_across_reopen_and_stores_filtered_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let text = "the ferry was late and the harbor was full, the crew had been waiting and the captain was calm";
    let plain = Signer::new(SignatureConfig::default()).unwrap().sign_text(text).vector;
    let dropped: Vec<u64> = plain.hashes().iter().copied().take(2).collect();
    let config = SignatureConfig {
        frequency_filter: neardex::FrequencyFilter::new(dropped.clone()),
        ..SignatureConfig::default()
    };
    {
        let index = Index::create(dir.path(), config.clone()).unwrap();
        let mut writer = index.writer().unwrap();
        writer.insert("doc", Document::Text(text), Metadata::default()).unwrap();
        writer.commit().unwrap();
        index.flush().unwrap();
    }
    let index = Index::open_expecting(dir.path(), &config).unwrap();
    assert_eq!(index.config().frequency_filter.hashes().len(), 2);
    let stored = index.searcher().unwrap().get("doc").unwrap().expect("stored").vector;
    assert_eq!(stored.distinct(), plain.distinct() - 2);
    assert!(dropped.iter().all(|&h| stored.freq(h) == 0));
    // The same index refuses the configuration without the filter.
    assert!(Index::open_expecting(dir.path(), &SignatureConfig::default()).is_err());
}

/// `compact_catalog` gives back the space pending documents took in the
/// catalog file (redb keeps its high-water mark), but not while a reader
/// holds a snapshot (compaction needs the file to itself); `optimize`
/// compacts too; a read-only index refuses. Either way the index verifies,
/// reopens and answers the same.
#[test]
fn compact_catalog_gives_back_the_space_of_flushed_documents() {
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    // Long documents, so that 3,000 pending ones make a catalog of tens of MB.
    let words: Vec<String> = (0..4_000).map(|i| format!("w{i}")).collect();
    let text = |n: usize| {
        let mut s = String::from("the ");
        for i in 0..600 {
            s.push_str(&words[(n * 7 + i * 13 + i * i) % words.len()]);
            s.push_str(if i % 3 == 0 { " is " } else { " a " });
        }
        s
    };
    let signatures: Vec<_> = (0..3_000).map(|n| signer.sign_text(&text(n))).collect();
    let dir = tempfile::tempdir().unwrap();
    let catalog_len = || std::fs::metadata(dir.path().join(neardex::store::CATALOG_FILE)).unwrap().len();
    let index = Index::create_with(dir.path(), SignatureConfig::default(), small(2_500)).unwrap();
    for chunk in (0..signatures.len()).collect::<Vec<_>>().chunks(500) {
        let mut w = index.writer().unwrap();
        for &n in chunk {
            w.insert(&n.to_string(), Document::Signatures(&signatures[n]), Metadata::default()).unwrap();
        }
        w.commit().unwrap();
    }
    let stats = index.stats().unwrap();
    assert_eq!((stats.documents, stats.segments, stats.pending), (3_000, 1, 500), "{stats:?}");
    let answers = |s: &Searcher| -> Vec<Vec<oracle::Match>> {
        signatures.iter().step_by(97).map(|q| s.query(&q.vector, Threshold::new(0.5).unwrap()).unwrap()).collect()
    };
    let before = answers(&index.searcher().unwrap());
    assert!(before.iter().all(|m| !m.is_empty()), "each document finds itself");
    let high = catalog_len();
    assert!(high > 16 << 20, "the pending documents made the catalog large: {high} bytes");
    let reader = index.searcher().unwrap();
    assert!(!index.compact_catalog().unwrap(), "not while a snapshot is held");
    assert_eq!(catalog_len(), high);
    drop(reader);
    assert!(index.compact_catalog().unwrap());
    let compacted = catalog_len();
    assert!(!index.compact_catalog().unwrap(), "a second compaction finds nothing to do");
    assert_eq!(catalog_len(), compacted);
    eprintln!("catalog bytes: {high} before compaction, {compacted} after");
    assert!(compacted * 2 < high, "compaction gave the space back: {compacted} against {high} bytes");
    index.verify().unwrap();
    assert_eq!(answers(&index.searcher().unwrap()), before);
    drop(index);
    let read_only = Index::open_read_only(dir.path()).unwrap();
    assert!(matches!(read_only.compact_catalog(), Err(IndexError::ReadOnly)));
    assert_eq!(answers(&read_only.searcher().unwrap()), before);
    drop(read_only);
    let index = Index::open(dir.path()).unwrap();
    index.verify().unwrap();
    assert_eq!(answers(&index.searcher().unwrap()), before);
    // optimize flushes the 500 pending documents and compacts.
    index.optimize().unwrap();
    assert_eq!(index.stats().unwrap().pending, 0);
    assert!(catalog_len() <= compacted, "{} after optimize", catalog_len());
    assert_eq!(answers(&index.searcher().unwrap()), before);
}

#[test]
fn a_chain_of_writers_commits_what_writers_asked_for_each_batch_commit() {
    // The same batches, each a bulk writer of its own in one index and a
    // chain of `commit_and_continue` in the other (whose segments are
    // built in the buffers the writer before used, a batch after a larger
    // one and after a smaller one): the same segment files, answers and
    // pairs.
    let batches: Vec<Vec<(String, String)>> = [40usize, 3, 25, 0, 60]
        .iter()
        .enumerate()
        .map(|(b, &n)| {
            (0..n)
                .map(|i| {
                    let key = format!("c{b}-{i}");
                    let body =
                        if i % 7 == 3 { text((i % 9) as u8) } else { format!("{} batch {b} line {i}", text(i as u8)) };
                    (key, body)
                })
                .collect()
        })
        .collect();
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let (one_by_one, chained) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let separate = Index::create_with(one_by_one.path(), SignatureConfig::default(), small(1000)).unwrap();
    for batch in &batches {
        let mut w = separate.bulk_writer().unwrap();
        for (key, body) in batch {
            w.insert(key, Document::Text(body), meta(key)).unwrap();
        }
        w.commit().unwrap();
    }
    let chain = Index::create_with(chained.path(), SignatureConfig::default(), small(1000)).unwrap();
    let mut model: Model = BTreeMap::new();
    let mut w = chain.bulk_writer().unwrap();
    for batch in &batches {
        for (key, body) in batch {
            w.insert(key, Document::Text(body), meta(key)).unwrap();
            model.insert(key.clone(), (body.clone(), meta(key)));
        }
        let (pending, next) = w.commit_and_continue().unwrap();
        assert_eq!(pending, 0, "a bulk writer's documents are never pending");
        // Committed, and visible before the chain ends.
        let committed = chain.searcher().unwrap();
        assert!(batch.iter().all(|(key, _)| committed.get(key).unwrap().is_some()));
        w = next;
    }
    // The next writer of a bulk writer is a bulk writer: its document
    // goes to a segment of its own.
    let before = chain.stats().unwrap().segments;
    w.insert("last", Document::Text(ARTICLE), meta("last")).unwrap();
    model.insert("last".into(), (ARTICLE.to_owned(), meta("last")));
    assert_eq!(w.commit().unwrap(), 0);
    assert_eq!(chain.stats().unwrap().segments, before + 1);
    let mut w = separate.bulk_writer().unwrap();
    w.insert("last", Document::Text(ARTICLE), meta("last")).unwrap();
    w.commit().unwrap();

    let files = |dir: &std::path::Path| {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().starts_with("seg-"))
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect();
        files.sort();
        files
    };
    let segments = files(chained.path());
    assert!(segments.len() >= 2, "{} segment files", segments.len());
    assert!(segments == files(one_by_one.path()), "the chain's segment files differ");
    check(&chain.searcher().unwrap(), &model, &signer).unwrap();
    let tau = Threshold::new(0.5).unwrap();
    let pairs = |index: &Index| {
        let mut pairs = Vec::new();
        index.searcher().unwrap().self_join(tau, |p| pairs.push((p.a, p.b))).unwrap();
        pairs.sort_unstable();
        pairs
    };
    let joined = pairs(&chain);
    assert!(!joined.is_empty());
    assert_eq!(joined, pairs(&separate));

    // A writer's chain goes on as writers: pending documents.
    let mut w = chain.writer().unwrap();
    w.insert("pending", Document::Text(&text(1)), meta("p")).unwrap();
    let (pending, mut w) = w.commit_and_continue().unwrap();
    assert_eq!(pending, 1);
    w.insert("pending too", Document::Text(&text(2)), meta("p2")).unwrap();
    assert_eq!(w.commit().unwrap(), 2);
}

#[test]
fn a_bulk_writer_commits_its_documents_to_a_segment_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let index = Index::create_with(dir.path(), SignatureConfig::default(), small(1000)).unwrap();
    let mut w = index.writer().unwrap();
    w.insert("pending", Document::Text(ARTICLE), meta("p")).unwrap();
    w.insert("goes", Document::Text(&text(3)), meta("g")).unwrap();
    w.commit().unwrap();

    let mut w = index.bulk_writer().unwrap();
    let mut model: Model = BTreeMap::new();
    model.insert("pending".into(), (ARTICLE.to_owned(), meta("p")));
    let mut duplicates = Vec::new();
    for n in 0..40u8 {
        let body = if n < 2 { ARTICLE.to_owned() } else { format!("{} item {n}", text(n)) };
        let outcome = w.insert(&format!("b{n}"), Document::Text(&body), meta(&format!("b{n}"))).unwrap();
        duplicates.push(outcome.exact_duplicate_of);
        model.insert(format!("b{n}"), (body, meta(&format!("b{n}"))));
    }
    // An exact copy of a pending document, then of a staged one.
    assert_eq!(duplicates[0], Some(index.searcher().unwrap().get("pending").unwrap().unwrap().id));
    assert_eq!(duplicates[1], duplicates[0]);
    // A delete of a pending document and of a staged one, a replace of a
    // staged one.
    assert!(w.delete("goes").unwrap());
    assert!(w.delete("b5").unwrap());
    model.remove("b5");
    w.replace("b6", Document::Text(&text(5)), meta("r")).unwrap();
    model.insert("b6".into(), (text(5), meta("r")));
    assert_eq!(w.commit().unwrap(), 1, "only the first writer's document is pending");
    let stats = index.stats().unwrap();
    assert_eq!((stats.segments, stats.pending), (1, 1), "{stats:?}");
    check(&index.searcher().unwrap(), &model, &signer).unwrap();

    // The join over the segment and the pending document against brute force.
    let searcher = index.searcher().unwrap();
    let tau = Threshold::new(0.5).unwrap();
    let mut pairs = Vec::new();
    searcher.self_join(tau, |p| pairs.push((p.a, p.b))).unwrap();
    pairs.sort_unstable();
    let mut live = Vec::new();
    searcher.for_each_live(|id, v| live.push((id, v.clone()))).unwrap();
    let docs: Vec<(u64, &neardex::SignatureVector)> = live.iter().map(|(id, v)| (*id, v)).collect();
    let expected = oracle::self_join(&docs, signer.config().similarity, tau);
    assert_eq!(pairs, expected.iter().map(|p| (p.a, p.b)).collect::<Vec<_>>());
    assert!(!pairs.is_empty());

    // Eight bulk commits fill a tier: they are merged, as flushes are.
    drop(searcher);
    for batch in 0..8u8 {
        let mut w = index.bulk_writer().unwrap();
        for n in 0..5u8 {
            let key = format!("m{batch}-{n}");
            let body = format!("{} batch {batch} line {n}", text(n));
            w.insert(&key, Document::Text(&body), meta(&key)).unwrap();
            model.insert(key.clone(), (body, meta(&key)));
        }
        w.commit().unwrap();
    }
    let stats = index.stats().unwrap();
    assert_eq!(stats.segments, 2, "the eight small segments merged: {stats:?}");
    check(&index.searcher().unwrap(), &model, &signer).unwrap();
    drop(index);
    let reopened = Index::open(dir.path()).unwrap();
    reopened.verify().unwrap();
    check(&reopened.searcher().unwrap(), &model, &signer).unwrap();
}

/// A crawler replacing pages that are still pending, commit after commit:
/// their number stays the same, so no flush comes. The delta's shared
/// inverted index lists every document removed since it began (a searcher
/// of an older state may hold them), so a commit replaces it once it lists
/// more than twice the pending documents and 1,024 more; exact and LSH
/// queries, of new searchers and of one held from before, stay exact
/// across the two replacements these rounds make.
#[test]
fn replacing_pending_documents_commit_after_commit_keeps_queries_exact() {
    const KEYS: u64 = 30;
    let dir = tempfile::tempdir().unwrap();
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let index = Index::create(dir.path(), SignatureConfig::default()).unwrap();
    let tau = Threshold::new(0.8).unwrap();
    let mut model: BTreeMap<u64, String> = BTreeMap::new();
    // Each page's versions differ in two words: many near-duplicates.
    let version = |round: u64| format!("{ARTICLE} This is version {} of page {}.", round / KEYS, round % KEYS);
    let queries: Vec<DocumentSignature> = [0, 7, 1_111, 2_299].iter().map(|&r| signer.sign_text(&version(r))).collect();
    // The answers a searcher must give, from the model by brute force.
    let expected = |searcher: &Searcher, model: &BTreeMap<u64, String>| -> Vec<Vec<oracle::Match>> {
        let live: BTreeMap<u64, neardex::SignatureVector> = model
            .iter()
            .map(|(k, text)| {
                let doc = searcher.get(&format!("k{k}")).unwrap().expect("a live key");
                assert_eq!(doc.vector, signer.sign_text(text).vector, "k{k} holds its latest version");
                (doc.id, doc.vector)
            })
            .collect();
        queries
            .iter()
            .map(|q| oracle::query(live.iter().map(|(&id, v)| (id, v)), &q.vector, signer.config().similarity, tau))
            .collect()
    };
    let answers = |searcher: &Searcher| -> Vec<Vec<oracle::Match>> {
        queries.iter().map(|q| searcher.query(&q.vector, tau).unwrap()).collect()
    };
    let mut held: Option<(Searcher, Vec<Vec<oracle::Match>>)> = None;
    for round in 0..2_300u64 {
        let mut w = index.writer().unwrap();
        w.replace(&format!("k{}", round % KEYS), Document::Text(&version(round)), Metadata::default()).unwrap();
        w.commit().unwrap();
        model.insert(round % KEYS, version(round));
        if round % 100 == 99 {
            let searcher = index.searcher().unwrap();
            let want = expected(&searcher, &model);
            assert_eq!(answers(&searcher), want, "round {round}");
            assert!(want.iter().all(|m| !m.is_empty()), "every query meets near-duplicates");
            for (q, exact) in queries.iter().zip(&want) {
                let lsh = searcher.query_lsh(q, tau).unwrap();
                assert!(lsh.iter().all(|m| exact.contains(m)), "round {round}: LSH finds exact matches only");
            }
            if round == 999 {
                held = Some((searcher, want));
            }
        }
    }
    let (searcher, then) = held.expect("a searcher held from round 999");
    assert_eq!(answers(&searcher), then, "a searcher keeps its snapshot's answers");
    let stats = index.stats().unwrap();
    assert_eq!((stats.documents, stats.pending, stats.segments), (KEYS, KEYS, 0), "no flush came");
}
